#ifndef DTENSOR_PARALLEL_APPLY_ACTIVATION_CHECKPOINT_H_
#define DTENSOR_PARALLEL_APPLY_ACTIVATION_CHECKPOINT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/nn/checkpoint.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/activation_checkpoint_plan.h"

namespace dtensor {
namespace parallel {

// What a plan's "activation_checkpoint" does to a module tree, decided
// before the tree changes: the modules to checkpoint and the policy.
struct ActivationCheckpointTargets {
  nn::CheckpointPolicy policy;
  std::vector<nn::Module*> modules;
};

// The modules of `root`'s tree that a pattern of `plan.modules` names
// (MatchPattern), in pattern order, with the plan's mode and kept ops.
// Errors: a pattern that names no module, an unknown mode (InvalidArgument
// naming it).
absl::StatusOr<ActivationCheckpointTargets> ResolveActivationCheckpoint(
    nn::Module& root, const ActivationCheckpointPlan& plan);

// Checkpoints (nn::CheckpointModule) every target module. A module
// checkpointed inside another checkpointed one is recomputed again in the
// outer one's backward (as torch.utils.checkpoint nests).
// Errors: nn::CheckpointModule's.
absl::Status ApplyActivationCheckpoint(
    const ActivationCheckpointTargets& targets);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_APPLY_ACTIVATION_CHECKPOINT_H_
