#ifndef DTENSOR_TENSOR_MATMUL_CUDA_H_
#define DTENSOR_TENSOR_MATMUL_CUDA_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// Matmul (matmul.h) on CUDA tensors, on cuBLAS (cuda_entry.h).
namespace dtensor::cuda {

absl::StatusOr<Tensor> MatmulOnDevice(const Tensor& a, const Tensor& b);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_MATMUL_CUDA_H_
