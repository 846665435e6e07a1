#include "dtensor/parallel/parallelize.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor.h"
#include "dtensor/parallel/fsdp.h"
#include "dtensor/parallel/parallel_style.h"
#include "dtensor/parallel/tp_local.h"
#include "dtensor/placement.h"
#include "dtensor/sharding.h"

namespace dtensor {
namespace parallel {
namespace {

// Moves an activation to `target` on mesh dim `tp`, keeping its other mesh
// dims.
absl::StatusOr<DTensor> RedistributeOnDim(const DTensor& x, int64_t tp,
                                          const Placement& target) {
  std::vector<Placement> placements = x.placements();
  if (tp >= static_cast<int64_t>(placements.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallelize: activation has ", placements.size(),
                     " mesh dims, tp dim is ", tp));
  }
  placements[tp] = target;
  return x.Redistribute(placements);
}

// The input hook of an entry: a tp-local input (dtensor/parallel/tp_local.h) is
// wrapped onto `mesh` with `local_sharding` on the tp dim, then moved to
// `target` (when set). Without a local sharding a tp-local input passes as it
// is.
nn::Module::Hook InputHook(const DeviceMesh& mesh, int64_t tp,
                           std::optional<Placement> local_sharding,
                           std::optional<Placement> target) {
  return [mesh, tp, local_sharding,
          target](const DTensor& input) -> absl::StatusOr<DTensor> {
    DTensor x = input;
    if (IsTpLocal(x, mesh, tp)) {
      if (!local_sharding) return x;
      DT_ASSIGN_OR_RETURN(x, FromTpLocal(x, mesh, tp, *local_sharding));
    }
    if (!target) return x;
    return RedistributeOnDim(x, tp, *target);
  };
}

// The output hook of an entry: a tp-local output wrapped onto `mesh` with
// `local_sharding` on the tp dim (when set), then moved to `target` (when
// set), then handed on as its tp-local value when `local_output`.
nn::Module::Hook OutputHook(const DeviceMesh& mesh, int64_t tp,
                            std::optional<Placement> local_sharding,
                            std::optional<Placement> target,
                            bool local_output) {
  return [mesh, tp, local_sharding, target,
          local_output](const DTensor& output) -> absl::StatusOr<DTensor> {
    DTensor y = output;
    if (local_sharding && IsTpLocal(y, mesh, tp)) {
      DT_ASSIGN_OR_RETURN(y, FromTpLocal(y, mesh, tp, *local_sharding));
    }
    if (target) {
      DT_ASSIGN_OR_RETURN(y, RedistributeOnDim(y, tp, *target));
    }
    if (local_output) return ToTpLocal(y, tp);
    return y;
  };
}

// Adds the hooks of a module entry.
absl::Status AddStyleHooks(const ResolvedEntry& r, const DeviceMesh& mesh,
                           int64_t tp) {
  DT_ASSIGN_OR_RETURN(StyleHooks h, r.style->Hooks(*r.module, r.fqn));
  if (h.input || h.local_input) {
    r.module->AddInputHook(InputHook(mesh, tp, h.local_input, h.input));
  }
  if (h.output || h.local_output || h.use_local_output) {
    r.module->AddOutputHook(
        OutputHook(mesh, tp, h.local_output, h.output, h.use_local_output));
  }
  return absl::OkStatus();
}

// The style that places `slot` of `module`: a parameter key's, else the
// module key's; null when no entry names either.
const ParallelStyle* PlacingStyle(const std::vector<ResolvedEntry>& resolved,
                                  const nn::Module* module,
                                  absl::string_view slot) {
  const ParallelStyle* style = nullptr;
  for (const ResolvedEntry& r : resolved) {
    if (r.module != module) continue;
    if (r.parameter == slot) return r.style.get();
    if (r.parameter.empty()) style = r.style.get();
  }
  return style;
}

bool OwnsParameters(const nn::Module& module) {
  for (const nn::TensorSlot& slot : module.slots()) {
    if (slot.is_parameter) return true;
  }
  return false;
}

// Whether module `name` is `ancestor` or inside it.
bool IsWithin(absl::string_view name, absl::string_view ancestor) {
  return ancestor.empty() || name == ancestor ||
         absl::StartsWith(name, absl::StrCat(ancestor, "."));
}

// The FSDP groups of `root`, in forward (module) order: each module that a
// plan.fsdp_groups pattern names, with the modules of its subtree that own
// parameters and that no nested group claims, and every other module that
// owns parameters alone. Errors: a pattern that names no module.
absl::StatusOr<std::vector<FsdpGroup>> FsdpGroupsOf(nn::Module& root,
                                                    const Plan& plan) {
  const std::vector<nn::NamedModule> named = root.NamedModules();
  for (const std::string& pattern : plan.fsdp_groups) {
    const bool names_one =
        std::any_of(named.begin(), named.end(), [&](const nn::NamedModule& m) {
          return MatchPattern(pattern, m.name);
        });
    if (!names_one) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan: fsdp_groups pattern \"", pattern, "\" names no module"));
    }
  }
  std::vector<FsdpGroup> groups;
  // The groups whose module encloses the current one, innermost last.
  std::vector<size_t> enclosing;
  for (const nn::NamedModule& m : named) {
    while (!enclosing.empty() &&
           !IsWithin(m.name, groups[enclosing.back()].name)) {
      enclosing.pop_back();
    }
    const bool is_group =
        std::any_of(plan.fsdp_groups.begin(), plan.fsdp_groups.end(),
                    [&](const std::string& pattern) {
                      return MatchPattern(pattern, m.name);
                    });
    if (is_group) {
      enclosing.push_back(groups.size());
      groups.push_back({m.name, m.module, {}});
    }
    if (!OwnsParameters(*m.module)) continue;
    if (enclosing.empty()) {
      groups.push_back({m.name, m.module, {m.module}});
    } else {
      groups[enclosing.back()].members.push_back(m.module);
    }
  }
  return groups;
}

// The sharding of a parameter: `placements`, and with FSDP dim 0 sharded on
// the dp dim as well, innermost (FSDP2's strided sharding with tp): so the
// all-gather on dp alone rebuilds the tp shard, and the gradient's
// reduce-scatter on dp alone shards it again.
absl::StatusOr<Sharding> ParameterSharding(std::vector<Placement> placements,
                                           int64_t tensor_rank,
                                           std::optional<int64_t> fsdp_dim) {
  if (fsdp_dim) placements[*fsdp_dim] = Placement::Replicate();
  DT_ASSIGN_OR_RETURN(Sharding sharding,
                      Sharding::FromPlacements(placements, tensor_rank));
  if (fsdp_dim && tensor_rank > 0) {
    sharding = sharding.WithShardsAppended({*fsdp_dim}, 0);
  }
  return sharding;
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
  // Hooks first (they can fail on a bad sharding), then the parameters.
  for (const ResolvedEntry& r : resolved) {
    // A parameter key places its parameter alone.
    if (r.parameter.empty()) DT_RETURN_IF_ERROR(AddStyleHooks(r, mesh, *tp));
  }
  const bool fsdp = dp && plan.dp == DataParallel::kFsdp;
  for (const nn::NamedModule& named : root.NamedModules()) {
    for (nn::TensorSlot& slot : named.module->slots()) {
      if (!slot.is_parameter || !slot.value.defined()) continue;
      std::vector<Placement> placements = slot.value.placements();
      const ParallelStyle* style =
          PlacingStyle(resolved, named.module, slot.name);
      std::optional<Placement> placement;
      if (style != nullptr) {
        placement = style->ParameterPlacement(*named.module, slot.name);
      }
      if (placement) placements[*tp] = *placement;
      if (dp) placements[*dp] = Placement::Replicate();
      DT_ASSIGN_OR_RETURN(
          Sharding sharding,
          ParameterSharding(std::move(placements),
                            static_cast<int64_t>(slot.shape.size()),
                            fsdp ? dp : std::nullopt));
      DT_ASSIGN_OR_RETURN(DTensor moved, slot.value.Redistribute(sharding));
      slot.value = std::move(moved);
    }
  }
  if (!fsdp) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(std::vector<FsdpGroup> groups, FsdpGroupsOf(root, plan));
  return AddFsdpGroups(std::move(groups), {*dp, plan.fsdp_prefetch});
}

}  // namespace parallel
}  // namespace dtensor
