#ifndef DTENSOR_TESTS_TENSOR_FUSED_NORM_REFERENCE_H_
#define DTENSOR_TESTS_TENSOR_FUSED_NORM_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "dtensor/tensor/tensor.h"
#include "tests/tensor/kernel_test_util.h"

// A reference of the fused residual add + RMSNorm (dtensor/tensor/fused_norm.h)
// in double, written from the textbook formulas of add-then-RMSNorm, shared by
// the CPU and the CUDA tests.
namespace dtensor::testing {

// The elements of `t` (any layout, any dtype) as doubles, row-major; empty
// for an undefined tensor.
std::vector<double> Values(const Tensor& t);

// The exact sum and its RMSNorm over rows of `width` (weight empty: ones).
struct Reference {
  std::vector<double> sum, normed;
};
Reference ReferenceForward(const std::vector<double>& residual,
                           const std::vector<double>& delta,
                           const std::vector<double>& weight, int64_t width,
                           double eps);

// From x (the sum): RMSNorm's dx for the output gradient g plus grad_sum
// (empty: none), and dweight (empty without a weight).
struct ReferenceGrads {
  std::vector<double> dx, dweight;
};
ReferenceGrads ReferenceBackward(const std::vector<double>& x,
                                 const std::vector<double>& weight,
                                 const std::vector<double>& g,
                                 const std::vector<double>& grad_sum,
                                 int64_t width, double eps);

// ToleranceFor(dtype) times `scale`.
Tolerance Scaled(DType dtype, double scale);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_FUSED_NORM_REFERENCE_H_
