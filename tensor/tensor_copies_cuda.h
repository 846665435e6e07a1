#ifndef DTENSOR_TENSOR_TENSOR_COPIES_CUDA_H_
#define DTENSOR_TENSOR_TENSOR_COPIES_CUDA_H_

#include "absl/status/status.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// The copies of tensor_copies.cc (Tensor::To, Contiguous, CopyFrom) between
// tensors on one CUDA device, converting the dtype (cuda_entry.h).
namespace dtensor::cuda {

// Copies `src` (already of dst's shape, any strides, any dtype, on dst's
// device) into `dst`, converting the dtype.
absl::Status CopyOnDevice(const Tensor& src, const Tensor& dst);
// CopyOnDevice ordered on `stream` (a cudaStream_t of dst's device, such as a
// communicator's) instead of the device's stream.
absl::Status CopyOnStream(const Tensor& src, const Tensor& dst, void* stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_TENSOR_COPIES_CUDA_H_
