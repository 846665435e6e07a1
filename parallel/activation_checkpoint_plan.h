#ifndef DTENSOR_PARALLEL_ACTIVATION_CHECKPOINT_PLAN_H_
#define DTENSOR_PARALLEL_ACTIVATION_CHECKPOINT_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/base/json_value.h"

namespace dtensor {
namespace parallel {

// A plan's "activation_checkpoint" (dtensor/nn/checkpoint.h): the module-name
// patterns whose modules are checkpointed, and how. In a plan file, a list of
// patterns (full mode) or an object:
//   "activation_checkpoint": ["layers.*"]
//   "activation_checkpoint": {"modules": ["layers.*"], "mode": "selective",
//                             "saved_ops": ["linear",
//                                           "scaled_dot_product_attention"]}
// "mode" defaults to "full"; "saved_ops" (selective mode only) to
// nn::CheckpointPolicy::DefaultSavedOps().
struct ActivationCheckpointPlan {
  std::vector<std::string> modules;
  std::string mode = "full";
  std::vector<std::string> saved_ops;
};

// Errors: a value of another type, an empty pattern or op name, an unknown
// key or mode, "saved_ops" with "mode": "full" (InvalidArgument naming it).
absl::StatusOr<ActivationCheckpointPlan> ParseActivationCheckpointPlan(
    const JsonValue& value);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_ACTIVATION_CHECKPOINT_PLAN_H_
