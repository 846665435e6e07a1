#ifndef DTENSOR_TENSOR_CUDA_OUT_OF_MEMORY_H_
#define DTENSOR_TENSOR_CUDA_OUT_OF_MEMORY_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace dtensor::cuda {

// "1.50 GiB (1610612736 bytes)": a byte count for people, exact in brackets.
std::string BytesText(size_t bytes);

// The error of a device allocation that does not fit: ResourceExhausted
// naming the bytes asked, the bytes free and the device's total (from
// cudaMemGetInfo, measured after the caching allocator returned its cached
// blocks), so that the step's owner can tell how far off it is. The callers
// add the device (Storage::Allocate) and the tensor (Tensor::Empty).
absl::Status OutOfDeviceMemory(size_t requested, size_t free, size_t total);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_OUT_OF_MEMORY_H_
