#include "dtensor/parallel/apply_activation_checkpoint.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/checkpoint.h"
#include "dtensor/parallel/plan_resolution.h"

namespace dtensor {
namespace parallel {

absl::Status ApplyActivationCheckpoint(nn::Module& root,
                                       const ActivationCheckpointPlan& plan) {
  if (plan.modules.empty()) return absl::OkStatus();
  nn::CheckpointPolicy policy;
  DT_ASSIGN_OR_RETURN(policy.mode, nn::ParseCheckpointMode(plan.mode));
  if (policy.mode == nn::CheckpointPolicy::Mode::kSelective) {
    policy.saved_ops = plan.saved_ops.empty()
                           ? nn::CheckpointPolicy::DefaultSavedOps()
                           : plan.saved_ops;
  }
  const std::vector<nn::NamedModule> modules = root.NamedModules();
  for (const std::string& pattern : plan.modules) {
    bool matched = false;
    for (const nn::NamedModule& named : modules) {
      if (!MatchPattern(pattern, named.name)) continue;
      matched = true;
      DT_RETURN_IF_ERROR(nn::CheckpointModule(*named.module, policy));
    }
    if (!matched) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: activation_checkpoint pattern \"", pattern,
                       "\" names no module"));
    }
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
