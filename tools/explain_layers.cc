#include "tools/explain_layers.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dtensor {
namespace {

// a + k * (b - a), for the numbers that grow by the same step per layer.
int64_t Grow(int64_t a, int64_t b, int64_t k) { return b + k * (b - a); }
double Grow(double a, double b, int64_t k) { return b + k * (b - a); }

CommTotals Grow(const CommTotals& a, const CommTotals& b, int64_t k) {
  CommTotals t;
  for (size_t i = 0; i < t.by_kind.size(); ++i) {
    t.by_kind[i].count = Grow(a.by_kind[i].count, b.by_kind[i].count, k);
    t.by_kind[i].bytes_per_rank =
        Grow(a.by_kind[i].bytes_per_rank, b.by_kind[i].bytes_per_rank, k);
    t.by_kind[i].time_us = Grow(a.by_kind[i].time_us, b.by_kind[i].time_us, k);
  }
  t.collectives = Grow(a.collectives, b.collectives, k);
  t.bytes_per_rank = Grow(a.bytes_per_rank, b.bytes_per_rank, k);
  t.time_us = Grow(a.time_us, b.time_us, k);
  return t;
}

MemoryEstimate Grow(const MemoryEstimate& a, const MemoryEstimate& b,
                    int64_t k) {
  MemoryEstimate m;
  m.parameters = Grow(a.parameters, b.parameters, k);
  m.gradients = Grow(a.gradients, b.gradients, k);
  m.optimizer_state = Grow(a.optimizer_state, b.optimizer_state, k);
  m.peak_activations = Grow(a.peak_activations, b.peak_activations, k);
  return m;
}

std::optional<RecomputeReport> Grow(const std::optional<RecomputeReport>& a,
                                    const std::optional<RecomputeReport>& b,
                                    int64_t k) {
  if (!a || !b) return b;
  RecomputeReport r;
  r.regions = Grow(a->regions, b->regions, k);
  r.recomputed_activations =
      Grow(a->recomputed_activations, b->recomputed_activations, k);
  // The largest region is a block's, whatever the number of blocks.
  r.working_set = b->working_set;
  r.saved_outputs = Grow(a->saved_outputs, b->saved_outputs, k);
  r.recomputed_calls = Grow(a->recomputed_calls, b->recomputed_calls, k);
  r.collectives = Grow(a->collectives, b->collectives, k);
  return r;
}

// Whether `name` is block `index` or inside it ("layers.1", "layers.1.x").
bool InBlock(const std::string& name, int64_t index) {
  const std::string block = absl::StrCat("layers.", index);
  return name == block || absl::StartsWith(name, block + ".");
}

// `name` of block `from` renamed into block `to`.
std::string Renumber(const std::string& name, int64_t from, int64_t to) {
  const size_t length = absl::StrCat("layers.", from).size();
  return absl::StrCat("layers.", to, name.substr(length));
}

void AppendBlock(const std::vector<ModuleReport>& block, int64_t from,
                 int64_t to, std::vector<ModuleReport>& out) {
  for (const ModuleReport& module : block) {
    ModuleReport copy = module;
    copy.name = Renumber(module.name, from, to);
    for (ParameterReport& parameter : copy.parameters) {
      parameter.name = Renumber(parameter.name, from, to);
    }
    out.push_back(std::move(copy));
  }
}

// The 3-layer model's modules with the middle block repeated.
std::vector<ModuleReport> GrowModules(const std::vector<ModuleReport>& three,
                                      int64_t n_layers) {
  std::vector<ModuleReport> before, middle, last, after;
  for (const ModuleReport& module : three) {
    if (InBlock(module.name, 1)) {
      middle.push_back(module);
    } else if (InBlock(module.name, 2)) {
      last.push_back(module);
    } else {
      (middle.empty() ? before : after).push_back(module);
    }
  }
  std::vector<ModuleReport> modules = std::move(before);
  modules.reserve(three.size() + (n_layers - 3) * middle.size());
  for (int64_t layer = 1; layer < n_layers - 1; ++layer) {
    AppendBlock(middle, 1, layer, modules);
  }
  AppendBlock(last, 2, n_layers - 1, modules);
  modules.insert(modules.end(), after.begin(), after.end());
  return modules;
}

}  // namespace

std::vector<std::string> WarningLines(
    const std::vector<std::pair<std::string, int64_t>>& warnings) {
  std::vector<std::string> lines;
  for (const auto& [text, n] : warnings) {
    lines.push_back(n == 1 ? text : absl::StrCat(text, " (x", n, ")"));
  }
  return lines;
}

bool IsLayerIndex(absl::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

bool PlanTreatsLayersAlike(const parallel::Plan& plan) {
  std::vector<absl::string_view> patterns;
  for (const parallel::PlanEntry& entry : plan.tp) {
    patterns.push_back(entry.pattern);
  }
  for (const std::string& pattern : plan.activation_checkpoint.modules) {
    patterns.push_back(pattern);
  }
  for (absl::string_view pattern : patterns) {
    for (absl::string_view part : absl::StrSplit(pattern, '.')) {
      if (IsLayerIndex(part)) return false;
    }
  }
  return true;
}

ExplainRun ExtrapolateLayers(const ExplainRun& two, const ExplainRun& three,
                             int64_t n_layers) {
  const int64_t extra = n_layers - 3;
  const ExplainReport &a = two.report, &b = three.report;
  ExplainRun run{ExplainReport{b.request}, {}};
  ExplainReport& report = run.report;
  // The report is of the n_layers-layer model, not of the 3-layer run.
  report.request.config.n_layers = n_layers;
  report.rank = b.rank;
  report.modules = GrowModules(b.modules, n_layers);
  report.forward = Grow(a.forward, b.forward, extra);
  report.backward = Grow(a.backward, b.backward, extra);
  report.optimizer = Grow(a.optimizer, b.optimizer, extra);
  report.step = Grow(a.step, b.step, extra);
  report.memory = Grow(a.memory, b.memory, extra);
  report.recompute = Grow(a.recompute, b.recompute, extra);
  for (const auto& [text, count] : three.warnings) {
    int64_t count_two = 0;
    for (const auto& [other, n] : two.warnings) {
      if (other == text) count_two = n;
    }
    run.warnings.push_back({text, Grow(count_two, count, extra)});
  }
  report.warnings = WarningLines(run.warnings);
  return run;
}

}  // namespace dtensor
