#ifndef DTENSOR_TENSOR_NORM_CUDA_H_
#define DTENSOR_TENSOR_NORM_CUDA_H_

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
// when `weight` is defined, dbias when `want_dbias` (LayerNorm only).
absl::StatusOr<NormGrads> NormBackwardOnDevice(const Tensor& x,
                                               const Tensor& weight,
                                               const Tensor& grad, double eps,
                                               bool layer_norm,
                                               bool want_dbias);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_NORM_CUDA_H_
