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
#include "collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "mesh/device_mesh.h"
#include "nn/llama_config.h"
#include "nn/module.h"
#include "parallel/plan.h"

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
