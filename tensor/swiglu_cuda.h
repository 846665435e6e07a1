#ifndef DTENSOR_TENSOR_SWIGLU_CUDA_H_
#define DTENSOR_TENSOR_SWIGLU_CUDA_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/swiglu.h"
#include "dtensor/tensor/tensor.h"

// SwiGlu and SwiGluBackward (swiglu.h) on CUDA tensors (cuda_entry.h), their
// operands checked by the caller: one kernel each.
namespace dtensor::cuda {

absl::StatusOr<Tensor> SwiGluOnDevice(const Tensor& a, const Tensor& b);
absl::StatusOr<SwiGluGrads> SwiGluBackwardOnDevice(const Tensor& grad,
                                                   const Tensor& a,
                                                   const Tensor& b);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_SWIGLU_CUDA_H_
