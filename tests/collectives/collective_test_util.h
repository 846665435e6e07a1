#ifndef DTENSOR_TESTS_COLLECTIVES_COLLECTIVE_TEST_UTIL_H_
#define DTENSOR_TESTS_COLLECTIVES_COLLECTIVE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

// Helpers of the collectives tests: per-rank inputs that every rank and the
// reference can rebuild from a seed, and plain-loop references (narrow,
// concatenate, reduce) over row-major double values that share no code with
// the collectives.
namespace dtensor::testing {

// The reference model of a tensor: its shape and row-major values.
struct HostTensor {
  Shape shape;
  std::vector<double> values;
};

std::vector<DType> AllDTypes();

// Values exact in every dtype: multiples of 1/8 in [-4, 4] for floating
// dtypes, integers in [-20, 20] for integer dtypes, 0/1 for bool. The same
// (shape, dtype, seed) gives the same values.
HostTensor RandomHost(const Shape& shape, DType dtype, uint64_t seed);

// A CPU tensor of `dtype` with the values of `host`: contiguous, or a
// strided view (every other element of a larger buffer along the last dim).
Tensor ToTensor(const HostTensor& host, DType dtype, bool contiguous = true);
HostTensor ToHost(const Tensor& tensor);

// Elements [start, start + length) of `dim`.
HostTensor NarrowHost(const HostTensor& host, int64_t dim, int64_t start,
                      int64_t length);
// Concatenation along `dim`.
HostTensor ConcatHost(const std::vector<HostTensor>& pieces, int64_t dim);
// The elementwise reduction of equal-shaped `inputs`, in double (bool: sum
// and max are or, min is and), rounded to `dtype`.
HostTensor ReduceHost(const std::vector<HostTensor>& inputs, ReduceOp op,
                      DType dtype);
// `host` as stored in `dtype`.
HostTensor RoundTo(const HostTensor& host, DType dtype);

// `actual` has the shape of `expected` and its values, within one unit in
// the last place of `dtype` (exact for integers and bool).
::testing::AssertionResult Matches(const Tensor& actual,
                                   const HostTensor& expected);

// `count` random sizes in [0, max_size] (zeros included).
std::vector<int64_t> RandomPieces(int64_t count, int64_t max_size,
                                  std::mt19937& rng);
// A random shape of 1 to 3 dims with sizes in [1, 4].
Shape RandomShape(std::mt19937& rng);

// Options for a test cluster: a deadline that ends a hung test quickly.
CommunicatorOptions TestOptions(absl::Duration deadline = absl::Seconds(30),
                                bool debug = false);

// Runs `fn` with the world communicator on every rank of a LocalCluster of
// `world_size` ranks; returns the first failure.
absl::Status RunOnWorld(int64_t world_size,
                        const std::function<absl::Status(Communicator&)>& fn,
                        const CommunicatorOptions& options = TestOptions());

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_COLLECTIVES_COLLECTIVE_TEST_UTIL_H_
