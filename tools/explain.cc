#include "tools/explain.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_owner.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/checkpoint.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/runtime.h"
#include "tools/explain_layers.h"

namespace dtensor {
namespace {

// How many FSDP groups' worth of parameters backward holds at once: the
// group computing, its gradients until they are reduce-scattered (as large
// as its gathered parameters) and, with prefetch, the group prefetched.
int64_t RebuildsAtOnce(const parallel::Plan& plan) {
  if (plan.dp != parallel::DataParallel::kFsdp) return 1;
  return plan.fsdp_prefetch ? 3 : 2;
}

absl::StatusOr<TensorLayout> LayoutOf(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(ShardBlock block, x.LocalBlock());
  return TensorLayout{x.shape(), x.dtype(), x.sharding().ToString(),
                      block.shape};
}

// Merges `event` into the identical summary of `list`, else appends it.
void AddCollective(const CommCounter::Event& event,
                   std::vector<CollectiveSummary>& list) {
  for (CollectiveSummary& s : list) {
    if (s.kind == event.kind && s.mesh_dims == event.mesh_dims &&
        s.bytes_per_rank == event.bytes && s.time_us == event.estimated_us) {
      ++s.count;
      return;
    }
  }
  list.push_back(
      {event.kind, event.mesh_dims, event.bytes, event.estimated_us, 1});
}

// `event` split by its shares (CommCounter::Event::shares): one event per
// owner with that owner's bytes and time; `event` itself when it has no
// shares. A share's time leaves out the collective's fixed latency, so that
// a module's figures do not depend on which other tensors share its bucket
// (the extrapolation over layers relies on that).
std::vector<CommCounter::Event> SharesOf(const CommCounter::Event& event) {
  if (event.shares.empty()) return {event};
  std::vector<CommCounter::Event> parts;
  parts.reserve(event.shares.size());
  for (const CommCounter::Event::Share& share : event.shares) {
    CommCounter::Event part = event;
    part.shares.clear();
    part.owner = share.owner;
    part.bytes = share.bytes;
    part.estimated_us = share.estimated_us;
    parts.push_back(std::move(part));
  }
  return parts;
}

// "layers.*.attention.wq" for "layers.17.attention.wq": repeats over layers
// share one warning.
std::string LayerPattern(absl::string_view name) {
  std::vector<std::string> parts = absl::StrSplit(name, '.');
  for (std::string& part : parts) {
    if (IsLayerIndex(part)) part = "*";
  }
  return absl::StrJoin(parts, ".");
}

// Warnings in first-seen order, repeats counted.
class Warnings {
 public:
  void Add(std::string text) {
    auto [it, inserted] = counts_.try_emplace(text, 0);
    if (inserted) order_.push_back(text);
    ++it->second;
  }
  std::vector<std::pair<std::string, int64_t>> Counts() const {
    std::vector<std::pair<std::string, int64_t>> counts;
    for (const std::string& text : order_) {
      counts.push_back({text, counts_.at(text)});
    }
    return counts;
  }

 private:
  std::vector<std::string> order_;
  absl::flat_hash_map<std::string, int64_t> counts_;
};

// A warning for every tensor dim of `x` that its mesh dims split unevenly.
void WarnUneven(absl::string_view what, const DTensor& x, Warnings& warnings) {
  const Sharding& sharding = x.sharding();
  for (int64_t d = 0; d < x.spec().ndim(); ++d) {
    int64_t shards = 1;
    for (int64_t m : sharding.MeshDimsSharding(d)) {
      shards *= x.mesh().shape()[m];
    }
    const int64_t size = x.shape()[d];
    if (shards == 1 || size % shards == 0) continue;
    const int64_t chunk = (size + shards - 1) / shards;
    warnings.Add(absl::StrCat(
        "uneven shards: ", what, " ", ShapeToString(x.shape()), " ",
        sharding.ToString(), ": dim ", d, " of size ", size, " in ", shards,
        " shards of at most ", chunk, " (the last ones smaller or empty)"));
  }
}

std::string MiB(double bytes) {
  return absl::StrFormat("%.1f MiB", bytes / (1 << 20));
}

void WarnLargeGather(const std::string& module, absl::string_view phase,
                     const CommCounter::Event& event, Warnings& warnings) {
  if (event.kind != CommKind::kAllGather || event.bytes < kLargeGatherBytes) {
    return;
  }
  warnings.Add(absl::StrCat(
      "large gather: ", module.empty() ? "(root)" : LayerPattern(module), " ",
      phase, " all_gather over mesh dims [",
      absl::StrJoin(event.mesh_dims, ","), "] (", event.label, ") receives ",
      MiB(event.bytes), " per rank"));
}

// The model's modules, their reports, and which owns what.
struct ModuleTable {
  std::vector<ModuleReport> reports;
  absl::flat_hash_map<const void*, size_t> index_of_owner;

  ModuleReport& OwnerOf(const CommCounter::Event& event) {
    auto found = index_of_owner.find(event.owner);
    return found == index_of_owner.end() ? reports.back()
                                         : reports[found->second];
  }
};

// Lists the modules with their parameters and adds hooks that note the
// layouts of each module's first input and output.
// `table` (empty) and `warnings` must outlive the model's hooks: the hooks
// refer to the reports, which are not moved afterwards.
absl::Status FillTable(nn::Module& root, ModuleTable& table,
                       Warnings& warnings) {
  std::vector<nn::NamedModule> modules = root.NamedModules();
  table.reports.resize(modules.size() + 1);
  for (size_t i = 0; i < modules.size(); ++i) {
    ModuleReport& report = table.reports[i];
    nn::Module& module = *modules[i].module;
    report.name = modules[i].name;
    report.type = std::string(module.type_name());
    table.index_of_owner[&module] = i;
    for (const nn::TensorSlot& slot : module.slots()) {
      if (!slot.is_parameter) continue;
      const std::string name = report.name.empty()
                                   ? slot.name
                                   : absl::StrCat(report.name, ".", slot.name);
      DT_ASSIGN_OR_RETURN(TensorLayout layout, LayoutOf(slot.value));
      report.parameters.push_back({name, std::move(layout)});
      WarnUneven(absl::StrCat("parameter ", LayerPattern(name)), slot.value,
                 warnings);
    }
    // Hooks run on the rank's thread during forward; the table outlives it.
    auto note = [&report, &warnings](bool input) {
      return [&report, &warnings,
              input](const DTensor& x) -> absl::StatusOr<DTensor> {
        std::optional<TensorLayout>& slot =
            input ? report.input : report.output;
        if (slot.has_value()) return x;
        DT_ASSIGN_OR_RETURN(slot, LayoutOf(x));
        WarnUneven(
            absl::StrCat(
                input ? "input of " : "output of ",
                report.name.empty() ? "(root)" : LayerPattern(report.name)),
            x, warnings);
        return x;
      };
    };
    module.AddInputHook(note(true));
    module.AddOutputHook(note(false));
  }
  table.reports.back().name = kOutsideModules;
  return absl::OkStatus();
}

// One training step run in full (every layer).
// What one metadata-only training step did: the collectives of each phase,
// the tensors the tape held at the end of forward, the gradients.
struct StepRecord {
  CommCounter forward, backward, update;
  nn::CheckpointTally checkpointing;
  std::vector<nn::GradientTape::HeldTensor> held;
  std::vector<DTensor> grads;
};

absl::Status RecordStep(parallel::LlamaTrainer& trainer,
                        const parallel::LlamaTrainer::Batch& batch,
                        StepRecord& step) {
  // A second tape beside the trainer's records the same calls: what it holds
  // at the end of forward is what the trainer's tape keeps.
  nn::GradientTape held_by_tape;
  DTensor loss;
  nn::CheckpointTally::Scope tallying(step.checkpointing);
  {
    CommCounter::Scope counting(step.forward);
    nn::GradientTape::Scope recording(held_by_tape);
    DT_ASSIGN_OR_RETURN(loss, trainer.Forward(batch));
  }
  step.held = held_by_tape.HeldTensors();
  held_by_tape.Clear();
  {
    CommCounter::Scope counting(step.backward);
    DT_ASSIGN_OR_RETURN(step.grads, trainer.Backward(loss));
  }
  CommCounter::Scope counting(step.update);
  return trainer.Update(step.grads);
}

// Adds the step's collectives to the report's phase totals and to the
// modules that issued them (a gradient bucket's by its shares), warning of
// large gathers.
void AttributeCollectives(const StepRecord& step, ModuleTable& table,
                          ExplainReport& report, Warnings& warnings) {
  for (const CommCounter::Event& event : step.forward.events()) {
    if (event.kind == CommKind::kLocal) continue;
    ModuleReport& owner = table.OwnerOf(event);
    AddCollective(event, owner.forward);
    report.forward.Add(event);
    WarnLargeGather(owner.name, "forward", event, warnings);
  }
  for (const CommCounter::Event& event : step.backward.events()) {
    if (event.kind == CommKind::kLocal) continue;
    for (const CommCounter::Event& part : SharesOf(event)) {
      ModuleReport& owner = table.OwnerOf(part);
      AddCollective(part, owner.backward);
      WarnLargeGather(owner.name, "backward", part, warnings);
    }
    report.backward.Add(event);
  }
  for (const CommCounter::Event& event : step.update.events()) {
    report.optimizer.Add(event);
  }
}

// What activation checkpointing did in the step; nullopt without it.
std::optional<RecomputeReport> RecomputeOf(const nn::CheckpointTally& tally) {
  if (tally.regions == 0) return std::nullopt;
  RecomputeReport r;
  r.regions = tally.regions;
  r.recomputed_activations = tally.recomputed_bytes;
  r.working_set = tally.largest_region_bytes;
  r.saved_outputs = tally.saved_bytes;
  r.recomputed_calls = tally.recomputed_calls;
  for (const CommCounter::Event& event : tally.recompute_collectives.events()) {
    r.collectives.Add(event);
  }
  return r;
}

absl::StatusOr<ExplainRun> RunStep(const ExplainRequest& request,
                                   int64_t rank) {
  if (rank < 0 || rank >= request.mesh.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " is not in mesh ", request.mesh.ToString()));
  }
  std::shared_ptr<Runtime> runtime = Runtime::MetadataOnly(rank);
  if (!request.links.empty()) {
    DT_RETURN_IF_ERROR(runtime->SetLinks(request.mesh, request.links));
  }
  parallel::LlamaTrainerOptions options;
  options.config = request.config;
  options.dtype = request.dtype;
  DT_ASSIGN_OR_RETURN(std::unique_ptr<parallel::LlamaTrainer> trainer,
                      parallel::LlamaTrainer::Create(runtime, request.mesh,
                                                     request.plan, options));
  DT_ASSIGN_OR_RETURN(parallel::LlamaTrainer::Batch batch,
                      trainer->MakeBatchMetadata(request.batch, request.seq));

  ExplainReport report{request};
  report.rank = rank;
  Warnings warnings;
  ModuleTable table;
  DT_RETURN_IF_ERROR(FillTable(trainer->model(), table, warnings));

  StepRecord step;
  DT_RETURN_IF_ERROR(RecordStep(*trainer, batch, step));
  AttributeCollectives(step, table, report, warnings);
  report.step.Add(report.forward);
  report.step.Add(report.backward);
  report.step.Add(report.optimizer);
  DT_ASSIGN_OR_RETURN(
      report.memory,
      EstimateStepMemory(trainer->parameters(), step.grads, step.held,
                         RebuildsAtOnce(request.plan)));
  report.recompute = RecomputeOf(step.checkpointing);
  // Backward holds one region's recomputed activations at a time.
  if (report.recompute) {
    report.memory.peak_activations += report.recompute->working_set;
  }
  report.modules = std::move(table.reports);
  ExplainRun run{std::move(report), warnings.Counts()};
  run.report.warnings = WarningLines(run.warnings);
  return run;
}

}  // namespace

void CommTotals::Add(const CommCounter::Event& event) {
  if (event.kind == CommKind::kLocal) return;
  PerKind& k = by_kind[static_cast<size_t>(event.kind)];
  ++k.count;
  k.bytes_per_rank += event.bytes;
  k.time_us += event.estimated_us;
  ++collectives;
  bytes_per_rank += event.bytes;
  time_us += event.estimated_us;
}

void CommTotals::Add(const CommTotals& other) {
  for (size_t i = 0; i < by_kind.size(); ++i) {
    by_kind[i].count += other.by_kind[i].count;
    by_kind[i].bytes_per_rank += other.by_kind[i].bytes_per_rank;
    by_kind[i].time_us += other.by_kind[i].time_us;
  }
  collectives += other.collectives;
  bytes_per_rank += other.bytes_per_rank;
  time_us += other.time_us;
}

absl::StatusOr<ExplainReport> ExplainLlamaStep(const ExplainRequest& request,
                                               int64_t rank) {
  const int64_t n_layers = request.config.n_layers;
  if (n_layers <= std::max<int64_t>(request.max_layers_run, 3) ||
      !PlanTreatsLayersAlike(request.plan)) {
    DT_ASSIGN_OR_RETURN(ExplainRun run, RunStep(request, rank));
    return std::move(run.report);
  }
  // Identical blocks: run 2 and 3 of them, extrapolate the rest.
  ExplainRequest fewer = request;
  fewer.config.n_layers = 2;
  DT_ASSIGN_OR_RETURN(ExplainRun two, RunStep(fewer, rank));
  fewer.config.n_layers = 3;
  DT_ASSIGN_OR_RETURN(ExplainRun three, RunStep(fewer, rank));
  return ExtrapolateLayers(two, three, n_layers).report;
}

}  // namespace dtensor
