#ifndef DTENSOR_TESTS_TENSOR_KERNEL_TEST_UTIL_H_
#define DTENSOR_TESTS_TENSOR_KERNEL_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

// Helpers shared by the kernel tests (matmul, nn_functional, indexing): random
// inputs in several memory layouts, index arithmetic for the references, and
// comparison against reference values computed in double.
namespace dtensor::testing {

// The dtypes kernels are tested with.
inline const std::vector<DType> kAllDTypes = {
    DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
    DType::kI32, DType::kI64, DType::kBool};
inline const std::vector<DType> kFloatDTypes = {DType::kF32, DType::kF64,
                                                DType::kBF16, DType::kF16};
inline const std::vector<DType> kNumericDTypes = {DType::kF32,  DType::kF64,
                                                  DType::kBF16, DType::kF16,
                                                  DType::kI32,  DType::kI64};

// The binary elementwise ops (dtensor/tensor/elementwise.h) by name, which the
// CUDA suites run on every dtype.
using BinaryFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
const std::vector<std::pair<std::string, BinaryFn>>& BinaryElementwiseOps();

// How a test tensor's elements are laid out in its storage.
enum class Layout {
  kContiguous,
  // A transposed view of a contiguous tensor whose last two dims are swapped
  // (kStrided for fewer than 2 dims).
  kTransposed,
  // Every other element of a contiguous tensor along the last dim.
  kStrided,
};

std::string LayoutName(Layout layout);

// Every layout, for tests that sweep them.
inline const std::vector<Layout> kLayouts = {
    Layout::kContiguous, Layout::kTransposed, Layout::kStrided};

// A tensor of `shape` and `layout`: floats uniform in [low, high) rounded to
// `dtype`, integers uniform in [low, high], bools fair coins.
Tensor RandomTensor(const Shape& shape, DType dtype, Layout layout,
                    std::mt19937& rng, double low = -1.0, double high = 1.0);

// A contiguous integer tensor of `dtype` (i32 or i64) with entries uniform in
// [0, bound).
Tensor RandomIndices(const Shape& shape, int64_t bound, DType dtype,
                     std::mt19937& rng);

// A uniform pick from `choices`.
template <typename T>
T Pick(const std::vector<T>& choices, std::mt19937& rng) {
  return choices[std::uniform_int_distribution<size_t>(
      0, choices.size() - 1)(rng)];
}

// A shape of `rank` dims, each a uniform pick from `sizes`.
Shape RandomShape(int rank, const std::vector<int64_t>& sizes,
                  std::mt19937& rng);

// The multi-index of row-major position `linear` in `shape`, and back.
std::vector<int64_t> Unravel(int64_t linear, const Shape& shape);
int64_t Ravel(const std::vector<int64_t>& index, const Shape& shape);

// Absolute and relative tolerance for results of order 1 computed in `dtype`:
// a few units in the last place of the dtype.
struct Tolerance {
  double atol;
  double rtol;
};
Tolerance ToleranceFor(DType dtype);

// Expects `actual` to have `shape` and elements within `tolerance` of
// `expected` (row-major): |actual - expected| <= atol + rtol * |expected|;
// NaN matches NaN and infinities must match exactly. Reports the first few
// mismatches with their index.
void ExpectClose(const Tensor& actual, const Shape& shape,
                 const std::vector<double>& expected, Tolerance tolerance,
                 const std::string& context = "");

// Expects `result` to be an InvalidArgument error whose message contains
// every one of `fragments`.
void ExpectInvalidArgument(const absl::StatusOr<Tensor>& result,
                           const std::vector<std::string>& fragments);

// Steps between two non-nan floats on the number line of adjacent floats
// (+inf one step above FLT_MAX, the smallest subnormal one above 0, -0 and
// +0 the same point): the ulp distance the fast math functions are held to.
int64_t UlpDistance(float a, float b);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_KERNEL_TEST_UTIL_H_
