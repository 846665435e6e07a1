#ifndef DTENSOR_TENSOR_NORM_BACKWARD_H_
#define DTENSOR_TENSOR_NORM_BACKWARD_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The gradients of RmsNorm and LayerNorm (dtensor/tensor/nn_functional.h) for
// the gradient `grad_out` of their output, in one fused pass over the rows of
// the last dim. With r = 1 / sqrt(mean((x - mean)^2) + eps) recomputed per
// row (mean 0 for RmsNorm), xhat = (x - mean) r and gh = grad_out * weight:
//   dx      = r (gh - mean(gh) - xhat mean(gh xhat))   (RmsNorm: no mean(gh))
//   dweight = the sum over the rows of grad_out * xhat
//   dbias   = the sum over the rows of grad_out.
// dx is contiguous with x's shape and dtype; dweight and dbias are [last dim]
// of x's dtype, each undefined when its parameter is (dbias always for
// RmsNorm; LayerNormBackward reads only the presence and shape of `bias`).
// Computed in f32 for f32, bf16 and f16 and in f64 for f64, with the row
// statistics and every sum in double, rounded once to the dtype; on a CUDA
// device by dtensor/tensor/cuda/norm_kernels.h, whose parameter gradients are
// per-chunk column sums added in a fixed order (deterministic, not bit-equal
// to the CPU's row-after-row sums).
// Errors: those of the forward for x, weight and bias; grad_out not of x's
// shape, dtype and device.
//
// NormGradsOf<T> holds a norm's three gradients as Tensors here (NormGrads)
// and as DTensors in the ops layer (ops::NormGradients), one definition for
// both layers.
template <typename T>
struct NormGradsOf {
  T dx;
  T dweight;
  T dbias;
};
using NormGrads = NormGradsOf<Tensor>;

absl::StatusOr<NormGrads> RmsNormBackward(const Tensor& x, const Tensor& weight,
                                          const Tensor& grad_out,
                                          double eps = 1e-6);
absl::StatusOr<NormGrads> LayerNormBackward(const Tensor& x,
                                            const Tensor& weight,
                                            const Tensor& bias,
                                            const Tensor& grad_out,
                                            double eps = 1e-5);

// Either of the two, for a caller that holds no bias (the DTensor op
// layer_norm_backward): RmsNormBackward unless `layer_norm`; dbias when
// `layer_norm` and `want_dbias`. A defined `residual_grad` (of x's shape,
// dtype and device) is added to dx in the same row pass, before dx is
// rounded to the dtype: the backward of the fused residual add + RMSNorm
// (dtensor/tensor/fused_norm.h), whose x also flows on as the residual.
// Errors: also a residual_grad not of x's shape, dtype and device.
absl::StatusOr<NormGrads> NormBackward(const Tensor& x, const Tensor& weight,
                                       const Tensor& grad_out, double eps,
                                       bool layer_norm, bool want_dbias,
                                       const Tensor& residual_grad = Tensor());

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_NORM_BACKWARD_H_
