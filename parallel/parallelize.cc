#include "dtensor/parallel/parallelize.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor.h"
#include "dtensor/parallel/apply_activation_checkpoint.h"
#include "dtensor/parallel/context_parallel.h"
#include "dtensor/parallel/fsdp.h"
#include "dtensor/parallel/mixed_precision.h"
#include "dtensor/parallel/parallel_style.h"
#include "dtensor/parallel/plan_resolution.h"
#include "dtensor/parallel/tp_local.h"
#include "dtensor/placement.h"

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

// `hook` with its errors prefixed by `context`, so that a layout that fails
// at the first forward names the module, its style and the option.
nn::Module::Hook WithContext(nn::Module::Hook hook, std::string context) {
  return [hook = std::move(hook), context = std::move(context)](
             const DTensor& x) -> absl::StatusOr<DTensor> {
    absl::StatusOr<DTensor> out = hook(x);
    if (out.ok()) return out;
    return absl::Status(out.status().code(),
                        absl::StrCat(context, out.status().message()));
  };
}

// Adds the hooks of a module entry.
void AddStyleHooks(const ResolvedEntry& r, const DeviceMesh& mesh, int64_t tp) {
  const StyleHooks& h = r.hooks;
  const std::string module =
      absl::StrCat("module \"", r.fqn, "\" (", r.style->name(), ") ");
  if (h.input || h.local_input) {
    r.module->AddInputHook(
        WithContext(InputHook(mesh, tp, h.local_input, h.input),
                    absl::StrCat(module, "input_layouts: ")));
  }
  if (h.output || h.local_output || h.use_local_output) {
    r.module->AddOutputHook(WithContext(
        OutputHook(mesh, tp, h.local_output, h.output, h.use_local_output),
        absl::StrCat(module, "output_layouts: ")));
  }
}

}  // namespace

absl::Status ParallelizeModule(nn::Module& root, const DeviceMesh& mesh,
                               const Plan& plan) {
  if (plan.mixed_precision) {
    DT_RETURN_IF_ERROR(CheckMixedPrecisionPolicy(*plan.mixed_precision));
  }
  // Every plan error before the module tree changes.
  DT_ASSIGN_OR_RETURN(PlanResolution resolution, ResolvePlan(plan, root, mesh));
  std::optional<ContextParallelTargets> context_parallel;
  if (plan.context_parallel.has_value()) {
    DT_ASSIGN_OR_RETURN(
        context_parallel,
        ResolveContextParallel(root, mesh, *plan.context_parallel));
  }
  DT_ASSIGN_OR_RETURN(
      const ActivationCheckpointTargets checkpointed,
      ResolveActivationCheckpoint(root, plan.activation_checkpoint));
  for (const ResolvedEntry& r : resolution.entries) {
    // A parameter key places its parameter alone.
    if (r.parameter.empty()) AddStyleHooks(r, mesh, *resolution.tp_dim);
  }
  if (context_parallel.has_value()) ApplyContextParallel(*context_parallel);
  for (const ResolvedParameter& p : resolution.parameters) {
    DT_ASSIGN_OR_RETURN(DTensor moved, p.slot->value.Redistribute(p.sharding));
    p.slot->value = std::move(moved);
  }
  DT_RETURN_IF_ERROR(ApplyActivationCheckpoint(checkpointed));
  if (resolution.fsdp) {
    if (plan.mixed_precision) {
      resolution.fsdp->param_dtype = plan.mixed_precision->param_dtype;
    }
    DT_RETURN_IF_ERROR(
        AddFsdpGroups(std::move(resolution.fsdp_groups), *resolution.fsdp));
  }
  // After FSDP's hooks: a group's gathered copies are then in param_dtype.
  if (!plan.mixed_precision) return absl::OkStatus();
  return AddMixedPrecisionHooks(root, *plan.mixed_precision);
}

}  // namespace parallel
}  // namespace dtensor
