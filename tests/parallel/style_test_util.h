#ifndef DTENSOR_TESTS_PARALLEL_STYLE_TEST_UTIL_H_
#define DTENSOR_TESTS_PARALLEL_STYLE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"

namespace dtensor {
namespace parallel_testing {

// What rank 0 saw of one step: the gathered logits and loss, and every
// parameter's gradient (taken by a GradientTape, then gathered), by name.
struct StepResult {
  std::vector<float> logits;
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;
};

// Called on every rank after the model is built and parallelized, before
// the step (to add observing hooks); its errors fail the step.
using AfterParallelize = std::function<absl::Status(nn::Module& model)>;

// One forward and backward step of the tiny Llama (seed 0) on in-process
// ranks of `mesh`: tokens [4, 8] and next-token targets, batch-sharded on a
// "dp" dim when the mesh has one; loss = mean cross entropy. With `plan` the
// model is parallelized first. Every rank checks that each gradient comes in
// its parameter's layout.
absl::StatusOr<StepResult> LlamaStep(const DeviceMesh& mesh,
                                     const std::optional<std::string>& plan,
                                     const AfterParallelize& after = nullptr);

// Initializes `model` (nn::Initialize on `mesh`) and, with `plan`,
// parallelizes it. Errors: those of the two calls.
absl::Status InitializeAndParallelize(
    nn::Module& model, std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh,
    const std::optional<parallel::Plan>& plan);

// `full` distributed as Replicate on every dim of `mesh`.
absl::StatusOr<DTensor> DistributeReplicated(std::shared_ptr<Runtime> runtime,
                                             const Tensor& full,
                                             const DeviceMesh& mesh);

// The gradients of `loss` with respect to the parameters `named`, taken from
// `tape` and gathered to full tensors, by parameter name.
// Errors: the tape's, or a gradient whose layout is not its parameter's
// (naming the parameter and both specs).
absl::StatusOr<std::map<std::string, std::vector<float>>> FullGradients(
    nn::GradientTape& tape, const DTensor& loss,
    const std::vector<nn::NamedSlot>& named);

// One forward and backward step of a model on one rank.
struct ModelStep {
  DTensor output;
  CommCounter forward;  // The forward's collectives (not the loss's).
  std::map<std::string, std::vector<float>> grads;  // FullGradients.
};

// The loss of a step, from the model's output.
using LossOf = std::function<absl::StatusOr<DTensor>(const DTensor& output)>;

// Runs `model` on `input` under a GradientTape, counting the forward's
// collectives, then `loss_of` its output, and takes every parameter's
// gradient (FullGradients). Errors: the model's, the loss's, FullGradients'.
absl::StatusOr<ModelStep> ForwardBackward(nn::Module& model,
                                          const DTensor& input,
                                          const LossOf& loss_of);

// Runs `step` on every in-process rank of `mesh` and returns what rank 0's
// step filled in; the first rank's error fails the run.
template <typename Result>
absl::StatusOr<Result> RankZeroResult(
    const DeviceMesh& mesh,
    const std::function<absl::Status(ProcessGroups&, Result&)>& step) {
  Result result;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  absl::Status status = cluster.Run([&](ProcessGroups& groups) {
    Result mine;
    absl::Status ok = step(groups, mine);
    if (ok.ok() && groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(mine);
    }
    return ok;
  });
  if (!status.ok()) return status;
  return result;
}

// Expects got[i] within abs_tol + 1e-4 |want[i]| of want[i] for every i
// (reports up to 5 mismatches, named `what`).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what, double abs_tol = 1e-5);

// Expects `got` to equal `want` (logits, loss and every gradient, same
// names) within 1e-4 relative + 1e-5 absolute.
void ExpectSameStep(const StepResult& got, const StepResult& want);

// The mesh of `shape` and `names` (ranks 0..n-1), for tests (aborts on bad
// arguments).
DeviceMesh Mesh(std::vector<int64_t> shape, std::vector<std::string> names);

}  // namespace parallel_testing
}  // namespace dtensor

#endif  // DTENSOR_TESTS_PARALLEL_STYLE_TEST_UTIL_H_
