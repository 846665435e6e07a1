#ifndef DTENSOR_PARALLEL_APPLY_ACTIVATION_CHECKPOINT_H_
#define DTENSOR_PARALLEL_APPLY_ACTIVATION_CHECKPOINT_H_

#include "absl/status/status.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/activation_checkpoint_plan.h"

namespace dtensor {
namespace parallel {

// Checkpoints (nn::CheckpointModule) every module of `root`'s tree that a
// pattern of `plan.modules` names (MatchPattern), with the plan's mode and
// kept ops. A module checkpointed inside another checkpointed one is
// recomputed again in the outer one's backward (as torch.utils.checkpoint
// nests). Errors: a pattern that names no module, an unknown mode
// (InvalidArgument naming it).
absl::Status ApplyActivationCheckpoint(nn::Module& root,
                                       const ActivationCheckpointPlan& plan);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_APPLY_ACTIVATION_CHECKPOINT_H_
