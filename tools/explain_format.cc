#include "tools/explain_format.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/json_text.h"
#include "dtensor/parallel/mixed_precision_policy.h"
#include "nlohmann/json.hpp"

namespace dtensor {
namespace {

using nlohmann::ordered_json;

// ---- JSON ----

ordered_json LayoutJson(const TensorLayout& t) {
  return {{"shape", t.shape},
          {"dtype", std::string(DTypeName(t.dtype))},
          {"layout", t.layout},
          {"local_shape", t.local_shape}};
}

// The policy's fields that are set, as dtype names.
ordered_json MixedPrecisionJson(const parallel::MixedPrecisionPolicy& policy) {
  ordered_json out = ordered_json::object();
  for (const auto& [key, dtype] :
       {std::pair{"param_dtype", policy.param_dtype},
        std::pair{"reduce_dtype", policy.reduce_dtype},
        std::pair{"output_dtype", policy.output_dtype}}) {
    if (dtype.has_value()) out[key] = std::string(DTypeName(*dtype));
  }
  return out;
}

ordered_json CollectivesJson(const std::vector<CollectiveSummary>& list) {
  ordered_json items = ordered_json::array();
  for (const CollectiveSummary& c : list) {
    items.push_back({{"kind", std::string(CommKindName(c.kind))},
                     {"mesh_dims", c.mesh_dims},
                     {"bytes_per_rank", JsonNumber(c.bytes_per_rank)},
                     {"time_us", JsonNumber(c.time_us)},
                     {"count", c.count}});
  }
  return items;
}

ordered_json ModuleJson(const ModuleReport& m) {
  ordered_json params = ordered_json::array();
  for (const ParameterReport& p : m.parameters) {
    // Its name, then its layout's fields.
    ordered_json param = {{"name", p.name}};
    param.update(LayoutJson(p.layout));
    params.push_back(std::move(param));
  }
  auto optional = [](const std::optional<TensorLayout>& t) {
    return t.has_value() ? LayoutJson(*t) : ordered_json(nullptr);
  };
  return {{"name", m.name},
          {"type", m.type},
          {"parameters", std::move(params)},
          {"activations",
           {{"input", optional(m.input)}, {"output", optional(m.output)}}},
          {"forward", CollectivesJson(m.forward)},
          {"backward", CollectivesJson(m.backward)}};
}

ordered_json TotalsJson(const CommTotals& t) {
  ordered_json kinds = ordered_json::object();
  for (CommKind kind : CommTotals::kKinds) {
    const CommTotals::PerKind& k = t.of(kind);
    kinds[std::string(CommKindName(kind))] = {
        {"count", k.count},
        {"bytes_per_rank", JsonNumber(k.bytes_per_rank)},
        {"time_us", JsonNumber(k.time_us)}};
  }
  return {{"by_kind", std::move(kinds)},
          {"collectives", t.collectives},
          {"bytes_per_rank", JsonNumber(t.bytes_per_rank)},
          {"time_us", JsonNumber(t.time_us)}};
}

ordered_json MeshJson(const DeviceMesh& mesh) {
  return {{"shape", mesh.shape()}, {"dim_names", mesh.dim_names()}};
}

ordered_json DeviceJson(const DeviceFit& d) {
  return {{"capacity", d.capacity},
          {"peak", d.peak},
          {"headroom", d.headroom()},
          {"fits", d.fits()}};
}

ordered_json RecomputeJson(const RecomputeReport& r) {
  return {{"regions", r.regions},
          {"recomputed_activations", r.recomputed_activations},
          {"working_set", r.working_set},
          {"saved_outputs", r.saved_outputs},
          {"recomputed_calls", r.recomputed_calls},
          {"collectives", TotalsJson(r.collectives)}};
}

// ---- Text ----

std::string Bytes(double bytes) {
  if (bytes < 1024) return absl::StrFormat("%.0f B", bytes);
  if (bytes < 1024.0 * 1024) return absl::StrFormat("%.1f KiB", bytes / 1024);
  if (bytes < 1024.0 * 1024 * 1024) {
    return absl::StrFormat("%.1f MiB", bytes / (1024.0 * 1024));
  }
  return absl::StrFormat("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
}

// Bytes with a minus sign for a negative count.
std::string SignedBytes(double bytes) {
  return bytes < 0 ? absl::StrCat("-", Bytes(-bytes)) : Bytes(bytes);
}

std::string Time(double us) {
  return us < 1000 ? absl::StrFormat("%.1f us", us)
                   : absl::StrFormat("%.2f ms", us / 1000);
}

std::string MeshDims(const DeviceMesh& mesh,
                     const std::vector<int64_t>& mesh_dims) {
  std::vector<std::string> names;
  for (int64_t m : mesh_dims) {
    names.push_back(m >= 0 && m < mesh.ndim() ? mesh.dim_names()[m]
                                              : absl::StrCat(m));
  }
  return absl::StrJoin(names, "+");
}

std::string LayoutText(const TensorLayout& t) {
  return absl::StrCat(ShapeToString(t.shape), " ",
                      std::string(DTypeName(t.dtype)), " ", t.layout, " local ",
                      ShapeToString(t.local_shape));
}

void AppendTotalsTable(const ExplainReport& r, std::string& out) {
  const std::pair<const char*, const CommTotals*> phases[] = {
      {"forward", &r.forward},
      {"backward", &r.backward},
      {"optimizer", &r.optimizer},
      {"step", &r.step}};
  absl::StrAppendFormat(&out, "%-10s", "phase");
  for (CommKind kind : CommTotals::kKinds) {
    absl::StrAppendFormat(&out, " %14s", CommKindName(kind));
  }
  absl::StrAppendFormat(&out, " %11s %12s %11s\n", "collectives", "bytes/rank",
                        "est. time");
  for (const auto& [name, totals] : phases) {
    absl::StrAppendFormat(&out, "%-10s", name);
    for (CommKind kind : CommTotals::kKinds) {
      absl::StrAppendFormat(&out, " %14d", totals->of(kind).count);
    }
    absl::StrAppendFormat(&out, " %11d %12s %11s\n", totals->collectives,
                          Bytes(totals->bytes_per_rank), Time(totals->time_us));
  }
}

// The rank's peak against one device's capacity (--device-memory).
void AppendDeviceFit(const ExplainReport& r, std::string& out) {
  const DeviceFit& d = *r.device;
  absl::StrAppend(&out, "\nMemory per device (one device per rank; rank ",
                  r.rank, "'s peak, docs/explain.md):\n");
  absl::StrAppendFormat(&out, "  %-17s %12s\n", "capacity", Bytes(d.capacity));
  absl::StrAppendFormat(
      &out, "  %-17s %12s  (%.1f%% of capacity)\n", "peak", Bytes(d.peak),
      100.0 * static_cast<double>(d.peak) / static_cast<double>(d.capacity));
  absl::StrAppendFormat(&out, "  %-17s %12s\n", "headroom",
                        SignedBytes(static_cast<double>(d.headroom())));
  absl::StrAppendFormat(&out, "  %-17s %12s\n", "fits",
                        d.fits() ? "yes" : "no");
}

void AppendRecompute(const RecomputeReport& r, std::string& out) {
  absl::StrAppend(&out, "\nActivation checkpointing (", r.regions,
                  " regions per step):\n");
  absl::StrAppendFormat(&out, "  %-24s %12s  (off peak activations)\n",
                        "recomputed activations",
                        Bytes(r.recomputed_activations));
  absl::StrAppendFormat(&out, "  %-24s %12s  (in peak activations)\n",
                        "recompute working set", Bytes(r.working_set));
  if (r.saved_outputs > 0) {
    absl::StrAppendFormat(&out, "  %-24s %12s\n", "kept op outputs",
                          Bytes(r.saved_outputs));
  }
  absl::StrAppendFormat(&out, "  %-24s %12d\n", "calls rerun in backward",
                        r.recomputed_calls);
  absl::StrAppendFormat(&out, "  %-24s %12d  (%s, in backward's)\n",
                        "collectives rerun", r.collectives.collectives,
                        Bytes(r.collectives.bytes_per_rank));
}

void AppendCollectives(const DeviceMesh& mesh, const char* phase,
                       const std::vector<CollectiveSummary>& list,
                       std::string& out) {
  for (const CollectiveSummary& c : list) {
    absl::StrAppendFormat(&out, "    %-8s %-14s over %-6s %10s/rank %10s%s\n",
                          phase, CommKindName(c.kind),
                          MeshDims(mesh, c.mesh_dims), Bytes(c.bytes_per_rank),
                          Time(c.time_us),
                          c.count > 1 ? absl::StrCat("  x", c.count) : "");
  }
}

}  // namespace

std::string ExplainJson(const ExplainReport& r) {
  ordered_json modules = ordered_json::array();
  for (const ModuleReport& m : r.modules) modules.push_back(ModuleJson(m));
  const MemoryEstimate& mem = r.memory;
  const ExplainRequest& q = r.request;
  ordered_json report = {{"model", "llama"},
                         {"config", q.config_name},
                         {"mesh", MeshJson(q.mesh)},
                         {"plan", q.plan_name},
                         {"batch", q.batch},
                         {"seq", q.seq},
                         {"dtype", std::string(DTypeName(q.dtype))},
                         {"rank", r.rank},
                         {"modules", std::move(modules)},
                         {"totals",
                          {{"forward", TotalsJson(r.forward)},
                           {"backward", TotalsJson(r.backward)},
                           {"optimizer", TotalsJson(r.optimizer)},
                           {"step", TotalsJson(r.step)}}},
                         {"memory_per_rank",
                          {{"parameters", mem.parameters},
                           {"gradients", mem.gradients},
                           {"optimizer_state", mem.optimizer_state},
                           {"peak_activations", mem.peak_activations},
                           {"total", mem.total()}}}};
  // A key of its own, only with --device-memory: the output without it stays
  // what scripts read.
  if (r.device.has_value()) report["memory_per_device"] = DeviceJson(*r.device);
  // Likewise only with a plan's policy.
  if (q.plan.mixed_precision) {
    report["mixed_precision"] = MixedPrecisionJson(*q.plan.mixed_precision);
  }
  if (r.recompute.has_value()) {
    report["activation_checkpoint"] = RecomputeJson(*r.recompute);
  }
  report["warnings"] = r.warnings;
  return DumpJson(report) + "\n";
}

std::string ExplainText(const ExplainReport& r) {
  const ExplainRequest& q = r.request;
  std::string out = absl::StrCat(
      "llama ", q.config_name, ", plan ", q.plan_name, ", mesh ",
      q.mesh.ToString(), ", batch ", q.batch, " x seq ", q.seq, ", ",
      std::string(DTypeName(q.dtype)),
      q.plan.mixed_precision
          ? absl::StrCat(", mixed precision ", parallel::MixedPrecisionToString(
                                                   *q.plan.mixed_precision))
          : "",
      " (the view of rank ", r.rank, ")\n\n");
  absl::StrAppend(&out, "Collectives per step (per rank):\n");
  AppendTotalsTable(r, out);
  const MemoryEstimate& mem = r.memory;
  absl::StrAppend(&out, "\nMemory per rank (estimate, docs/explain.md):\n");
  for (const auto& [name, bytes] : std::vector<std::pair<const char*, int64_t>>{
           {"parameters", mem.parameters},
           {"gradients", mem.gradients},
           {"optimizer state", mem.optimizer_state},
           {"peak activations", mem.peak_activations},
           {"total", mem.total()}}) {
    absl::StrAppendFormat(&out, "  %-17s %12s\n", name, Bytes(bytes));
  }
  if (r.device.has_value()) AppendDeviceFit(r, out);
  if (r.recompute.has_value()) AppendRecompute(*r.recompute, out);
  absl::StrAppend(&out, "\nWarnings:", r.warnings.empty() ? " none\n" : "\n");
  for (const std::string& w : r.warnings) absl::StrAppend(&out, "  ", w, "\n");
  absl::StrAppend(&out, "\nModules:\n");
  for (const ModuleReport& m : r.modules) {
    if (m.parameters.empty() && m.forward.empty() && m.backward.empty()) {
      continue;
    }
    absl::StrAppend(&out, "  ", m.name.empty() ? "(root)" : m.name,
                    m.type.empty() ? "" : absl::StrCat(" (", m.type, ")"),
                    "\n");
    for (const ParameterReport& p : m.parameters) {
      absl::StrAppend(&out, "    param    ", p.name, " ", LayoutText(p.layout),
                      "\n");
    }
    if (m.input.has_value()) {
      absl::StrAppend(&out, "    input    ", LayoutText(*m.input), "\n");
    }
    if (m.output.has_value()) {
      absl::StrAppend(&out, "    output   ", LayoutText(*m.output), "\n");
    }
    AppendCollectives(r.request.mesh, "forward", m.forward, out);
    AppendCollectives(r.request.mesh, "backward", m.backward, out);
  }
  return out;
}

}  // namespace dtensor
