#include "parallel/parallelize.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/dtensor.h"
#include "dtensor/placement.h"
#include "tensor/status_macros.h"

namespace dtensor {
namespace parallel {
namespace {

// Where a style puts a slot of a module on the tp dim.
Placement TpPlacement(Style style, absl::string_view type,
                      absl::string_view slot) {
  bool embedding = type == "Embedding";
  switch (style) {
    case Style::kColwise:
    case Style::kLossParallel:
      return Placement::Shard(embedding ? 1 : 0);
    case Style::kRowwise:
      if (embedding) return Placement::Shard(0);
      return slot == "weight" ? Placement::Shard(1) : Placement::Replicate();
    default:
      return Placement::Replicate();
  }
}

absl::StatusOr<Placement> ParseLayout(const std::string& fqn,
                                      const std::string& text) {
  absl::StatusOr<Placement> placement = ParsePlacement(text);
  if (!placement.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: bad layout \"", text, "\" for \"", fqn,
                     "\": ", placement.status().message()));
  }
  return placement;
}

// A hook that moves an activation to `target` on mesh dim `tp`, keeping its
// other mesh dims.
nn::Module::Hook RedistributeOnDim(int64_t tp, Placement target) {
  return [tp, target](const DTensor& x) -> absl::StatusOr<DTensor> {
    std::vector<Placement> placements = x.placements();
    if (tp >= static_cast<int64_t>(placements.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("parallelize: activation has ", placements.size(),
                       " mesh dims, tp dim is ", tp));
    }
    placements[tp] = target;
    return x.Redistribute(placements);
  };
}

// The hooks of one entry: (input target, output target) on the tp dim.
struct HookTargets {
  std::optional<Placement> input;
  std::optional<Placement> output;
};

absl::StatusOr<HookTargets> Targets(const ResolvedEntry& r) {
  const StyleSpec& spec = r.entry->spec;
  HookTargets t;
  std::optional<Placement> in, out;
  if (spec.input_layouts) {
    DT_ASSIGN_OR_RETURN(in, ParseLayout(r.fqn, *spec.input_layouts));
  }
  if (spec.output_layouts) {
    DT_ASSIGN_OR_RETURN(out, ParseLayout(r.fqn, *spec.output_layouts));
  }
  bool embedding = r.module->type_name() == "Embedding";
  switch (spec.style) {
    case Style::kColwise:
      // Token ids of an embedding are replicated already.
      if (!embedding) t.input = Placement::Replicate();
      t.output = out;
      break;
    case Style::kLossParallel:
      t.input = Placement::Replicate();
      t.output = Placement::Shard(-1);
      break;
    case Style::kRowwise:
      if (!embedding) t.input = Placement::Shard(-1);
      t.output = out.value_or(Placement::Replicate());
      break;
    case Style::kSequenceParallel:
      t.input = in.value_or(Placement::Shard(1));
      t.output = out;
      break;
    case Style::kPrepareInput:
    case Style::kPrepareOutput:
      t.input = in;
      t.output = out;
      break;
  }
  return t;
}

}  // namespace

absl::Status ParallelizeModule(nn::Module& root, const DeviceMesh& mesh,
                               const Plan& plan) {
  DT_ASSIGN_OR_RETURN(std::vector<ResolvedEntry> resolved,
                      ResolvePlan(plan, root, mesh));
  std::optional<int64_t> tp, dp;
  if (!plan.tp.empty()) {
    DT_ASSIGN_OR_RETURN(tp, mesh.DimIndex(plan.tp_dim));
  }
  if (plan.dp != DataParallel::kNone) {
    DT_ASSIGN_OR_RETURN(dp, mesh.DimIndex(plan.dp_dim));
  }
  // Hooks first (they can fail on a bad layout), then the parameters.
  for (const ResolvedEntry& r : resolved) {
    DT_ASSIGN_OR_RETURN(HookTargets t, Targets(r));
    if (t.input) r.module->AddInputHook(RedistributeOnDim(*tp, *t.input));
    if (t.output) r.module->AddOutputHook(RedistributeOnDim(*tp, *t.output));
  }
  for (const nn::NamedModule& named : root.NamedModules()) {
    const PlanEntry* entry = nullptr;
    for (const ResolvedEntry& r : resolved) {
      if (r.module == named.module) entry = r.entry;
    }
    for (nn::TensorSlot& slot : named.module->slots()) {
      if (!slot.is_parameter || !slot.value.defined()) continue;
      std::vector<Placement> placements = slot.value.placements();
      if (entry != nullptr) {
        placements[*tp] = TpPlacement(entry->spec.style,
                                      named.module->type_name(), slot.name);
      }
      if (dp && plan.dp == DataParallel::kFsdp) {
        placements[*dp] = Placement::Shard(0);
      } else if (dp) {
        placements[*dp] = Placement::Replicate();
      }
      DT_ASSIGN_OR_RETURN(DTensor moved, slot.value.Redistribute(placements));
      slot.value = std::move(moved);
    }
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
