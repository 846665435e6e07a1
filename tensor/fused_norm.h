#ifndef DTENSOR_TENSOR_FUSED_NORM_H_
#define DTENSOR_TENSOR_FUSED_NORM_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The residual add of a pre-norm transformer block fused with the RMSNorm
// that follows it, in one pass over the rows of the last dim:
//   sum    = residual + delta               (the next residual stream)
//   normed = RmsNorm(sum, weight, eps)      (dtensor/tensor/nn_functional.h)
// Each sum element is rounded to the dtype as Add stores it and the norm is
// taken of the rounded sums, so the CPU results equal Add then RmsNorm bit for
// bit; on a CUDA device (dtensor/tensor/cuda/fused_norm_body.h, 16-byte loads
// where the rows allow) the sum of squares is added in another order.
// `weight` may be undefined (ones). Both outputs are contiguous, of
// residual's shape, dtype and device.
// Errors: residual not floating of at least 1 dim; delta not of residual's
// shape, dtype and device; weight not [last dim] of residual's dtype and
// device.
struct AddRmsNormOutputs {
  Tensor sum;
  Tensor normed;
};
absl::StatusOr<AddRmsNormOutputs> AddRmsNorm(const Tensor& residual,
                                             const Tensor& delta,
                                             const Tensor& weight,
                                             double eps = 1e-6);

// The backward of AddRmsNorm from `sum` (its output, the norm's input) and
// the gradients of its outputs, in one row pass: the residual's and the
// delta's gradient are both
//   dx = RmsNormBackward(sum, weight, grad_normed).dx + grad_sum
// (rounded once), and dweight is RmsNormBackward's (undefined without a
// weight). `grad_sum` may be undefined (no gradient reaches the residual
// stream). dbias is undefined.
// Errors: RmsNormBackward's; grad_sum not of sum's shape, dtype and device.
absl::StatusOr<NormGrads> AddRmsNormBackward(const Tensor& sum,
                                             const Tensor& weight,
                                             const Tensor& grad_normed,
                                             const Tensor& grad_sum,
                                             double eps = 1e-6);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_FUSED_NORM_H_
