#ifndef DTENSOR_EXAMPLES_MLP_MLP_H_
#define DTENSOR_EXAMPLES_MLP_MLP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/comm_counter.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace examples {

// A user's own model, trained with the general trainer (docs/parallel.md,
// "Your own model"): Linear(16, hidden) -> ReLU -> Linear(hidden, 16) with
// MSE loss and AdamW, on in-process ranks of any mesh.
struct MlpOptions {
  int64_t hidden = 64;
  // Rows of the batch (split over the plan's dp dim).
  int64_t batch = 8;
  int steps = 3;
};

// What rank 0 saw.
struct MlpRun {
  std::vector<double> losses;  // One per step.
  // The trained parameters, whole, by name ("0.weight", ...).
  std::map<std::string, Tensor> parameters;
  // The last step's collectives, by phase.
  CommCounter forward, backward, update;
};

// Trains the MLP on one in-process rank per device of `mesh`, parallelized
// by `plan`. Errors: those of the plan, the trainer and the ranks.
absl::StatusOr<MlpRun> TrainMlp(const DeviceMesh& mesh,
                                const parallel::Plan& plan,
                                const MlpOptions& options = {});

// The plan of the MLP in code: the first Linear colwise, the second rowwise,
// data-parallel replicas on "dp" (examples/mlp/mlp_plan.json says the same).
parallel::Plan MlpPlan();

}  // namespace examples
}  // namespace dtensor

#endif  // DTENSOR_EXAMPLES_MLP_MLP_H_
