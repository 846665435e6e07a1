#include "dtensor/parallel/apply_activation_checkpoint.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/plan_resolution.h"

namespace dtensor {
namespace parallel {

absl::StatusOr<ActivationCheckpointTargets> ResolveActivationCheckpoint(
    nn::Module& root, const ActivationCheckpointPlan& plan) {
  ActivationCheckpointTargets targets;
  if (plan.modules.empty()) return targets;
  DT_ASSIGN_OR_RETURN(targets.policy.mode, nn::ParseCheckpointMode(plan.mode));
  if (targets.policy.mode == nn::CheckpointPolicy::Mode::kSelective) {
    targets.policy.saved_ops = plan.saved_ops.empty()
                                   ? nn::CheckpointPolicy::DefaultSavedOps()
                                   : plan.saved_ops;
  }
  const std::vector<nn::NamedModule> modules = root.NamedModules();
  for (const std::string& pattern : plan.modules) {
    bool matched = false;
    for (const nn::NamedModule& named : modules) {
      if (!MatchPattern(pattern, named.name)) continue;
      matched = true;
      targets.modules.push_back(named.module);
    }
    if (!matched) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: activation_checkpoint pattern \"", pattern,
                       "\" names no module"));
    }
  }
  return targets;
}

absl::Status ApplyActivationCheckpoint(
    const ActivationCheckpointTargets& targets) {
  for (nn::Module* module : targets.modules) {
    DT_RETURN_IF_ERROR(nn::CheckpointModule(*module, targets.policy));
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
