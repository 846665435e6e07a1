#ifndef DTENSOR_TESTS_PARALLEL_CHECKPOINT_TEST_UTIL_H_
#define DTENSOR_TESTS_PARALLEL_CHECKPOINT_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/state_dict.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace testing {

// One tensor of a test state: its name, global values and layout.
struct TensorCase {
  std::string key;
  Tensor full;
  std::vector<Placement> placements;
  ShardOrder order;
};

// A unique directory under TEST_TMPDIR named after `name`.
std::string TestDirectory(const std::string& name);

// The global tensor of `shape` and `dtype` whose element i (row-major) is
// ((i * 7 + salt * 13) mod 201) - 100: small integers, exact in bf16.
absl::StatusOr<Tensor> PatternTensor(const Shape& shape, DType dtype,
                                     int64_t salt);

// The same as `full` where `local` is this rank's block of it (exact).
absl::StatusOr<bool> LocalMatches(const DTensor& local, const Tensor& full);

// Runs `fn(runtime, rank)` on every rank of an in-process cluster of
// `world_size` ranks; returns each rank's status.
std::vector<absl::Status> RunRanks(
    int64_t world_size,
    const std::function<absl::Status(std::shared_ptr<Runtime>)>& fn);

// `cases` distributed over `mesh` (each rank's DTensors).
absl::StatusOr<nn::StateDict> DistributeCases(
    std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh,
    const std::vector<TensorCase>& cases);

// A random mesh of `size` ranks with 1 to 3 dims and a shuffled rank list.
DeviceMesh RandomMesh(int64_t size, std::mt19937& rng);

// A random layout of a tensor of rank `tensor_rank` over `mesh`: Shard of a
// random dim, Replicate, or (when `allow_partial`) Partial(sum) per mesh dim,
// and a random nesting order.
void RandomSharding(const DeviceMesh& mesh, int64_t tensor_rank,
                    bool allow_partial, std::mt19937& rng,
                    std::vector<Placement>& placements, ShardOrder& order);

}  // namespace testing
}  // namespace dtensor

#endif  // DTENSOR_TESTS_PARALLEL_CHECKPOINT_TEST_UTIL_H_
