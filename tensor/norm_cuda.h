#ifndef DTENSOR_TENSOR_NORM_CUDA_H_
#define DTENSOR_TENSOR_NORM_CUDA_H_

#include <utility>

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/tensor.h"

// RmsNorm and LayerNorm (nn_functional.h) and their backward
// (norm_backward.h) on CUDA tensors (cuda_entry.h).
namespace dtensor::cuda {

absl::StatusOr<Tensor> RmsNormOnDevice(const Tensor& x, const Tensor& weight,
                                       double eps);
// `weight` and `bias` may be undefined (ones, zeros).
absl::StatusOr<Tensor> LayerNormOnDevice(const Tensor& x, const Tensor& weight,
                                         const Tensor& bias, double eps);
// NormBackward of a CUDA `x`, its operands checked by the caller: dweight
// when `weight` is defined, dbias when `want_dbias` (LayerNorm only); a
// defined `residual_grad` is added to dx in the row pass.
absl::StatusOr<NormGrads> NormBackwardOnDevice(
    const Tensor& x, const Tensor& weight, const Tensor& grad, double eps,
    bool layer_norm, bool want_dbias, const Tensor& residual_grad = Tensor());
// AddRmsNorm (dtensor/tensor/fused_norm.h) of CUDA tensors, checked by the
// caller: contiguous `sum` and `normed` of residual's shape, then one launch.
absl::StatusOr<std::pair<Tensor, Tensor>> AddRmsNormOnDevice(
    const Tensor& residual, const Tensor& delta, const Tensor& weight,
    double eps);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_NORM_CUDA_H_
