#ifndef DTENSOR_TESTS_OPS_OP_TEST_UTIL_H_
#define DTENSOR_TESTS_OPS_OP_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/placement.h"
#include "dtensor/runtime.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace testing_util {

// A mesh shape drawn at random: 1-D (1 to 5 ranks), 2-D or 3-D (at most 8
// ranks).
std::vector<int64_t> RandomMeshShape(std::mt19937& rng);

// A sharding of a tensor over a mesh: one placement per mesh dim and the
// nesting order of the mesh dims sharding each tensor dim.
struct TestSharding {
  std::vector<Placement> placements;
  ShardOrder order;

  std::string ToString() const;
};

// Per mesh dim: Replicate, Shard of a random dim, or Partial with an op from
// `partial_ops` (none when empty); the nesting orders shuffled.
TestSharding RandomSharding(int64_t mesh_ndim, int64_t tensor_rank,
                            const std::vector<ReduceOp>& partial_ops,
                            std::mt19937& rng);

// The Partial ops a tensor of `dtype` may hold: sum, avg, max, min for
// floats; sum, max, min for integers; max, min for bool.
std::vector<ReduceOp> PartialOpsFor(DType dtype);

// Values of a full tensor: uniform in [low, high) for floating dtypes,
// integers in [ceil(low), floor(high)] for integer ones, random for bool.
Tensor RandomTensor(const Shape& shape, DType dtype, double low, double high,
                    std::mt19937& rng);

// A shape of `rank` dims with sizes in [0, max_size] (0 rarely).
Shape RandomShape(int64_t rank, int64_t max_size, std::mt19937& rng);

// The device the checks of this library put every rank's shards on (the
// ranks of a check share it): the CPU, or the CUDA device the environment
// variable DTENSOR_TEST_DEVICE names ("cuda", "cuda:1"). How the GPU bundle
// runs the op family tests on CUDA DTensors, the in-process ranks staging
// their collectives through the host (dtensor/collectives/host_staging.h). The
// variable is read once per process.
// Errors: another name; a CUDA device that is absent.
absl::StatusOr<Device> CheckDevice();

// This rank's DTensor of `full` laid out by `sharding`, on CheckDevice(), with
// non-trivial Partial terms: over every Partial(sum | avg) mesh dim each rank
// adds noise that cancels across the mesh dim; over a Partial(max | min) mesh
// dim the ranks but the first hold values below (above) the value. Reducing the
// terms gives `full` back.
absl::StatusOr<DTensor> DistributeWithTerms(std::shared_ptr<Runtime> runtime,
                                            const Tensor& full,
                                            const DeviceMesh& mesh,
                                            const TestSharding& sharding);

// One call of an op to check: full inputs (undefined for an absent optional
// input) and their shardings.
struct OpCase {
  std::vector<Tensor> inputs;
  std::vector<TestSharding> shardings;
  std::string description;
};

// The inputs (and outputs) of a call on DTensors, and of its reference on
// full tensors: what CheckCases, RunOnMeta and GradCase's calls take.
using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

// The op on DTensors, and the reference on full tensors.
using DTensorCall = std::function<absl::StatusOr<std::vector<DTensor>>(
    const std::vector<DTensor>& inputs)>;
using ReferenceCall = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>& inputs)>;

// Runs every case on in-process ranks of a mesh of `mesh_shape`: each rank
// distributes the inputs (DistributeWithTerms), calls `call`, checks that
// every output's local shard has the shape its sharding gives the rank, and
// compares every output gathered (FullTensor) with `reference` on the full
// inputs (AllClose with rtol, atol, in f64). Returns the first failure,
// naming the case.
absl::Status CheckCases(const std::vector<int64_t>& mesh_shape,
                        const std::vector<OpCase>& cases,
                        const DTensorCall& call, const ReferenceCall& reference,
                        double rtol, double atol);

// A metadata-only DTensor of `shape` laid out by `sharding_text`
// (Sharding::Parse text, e.g. "S(0),R").
absl::StatusOr<DTensor> MetaTensor(std::shared_ptr<Runtime> runtime,
                                   const DeviceMesh& mesh, const Shape& shape,
                                   absl::string_view sharding_text,
                                   DType dtype = DType::kF32);

}  // namespace testing_util
}  // namespace dtensor

#endif  // DTENSOR_TESTS_OPS_OP_TEST_UTIL_H_
