#ifndef DTENSOR_TENSOR_CUDA_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtensor::cuda {

// Sets `count` 32-bit words at device pointer `dst` to `bits` on `stream`.
cudaError_t LaunchFill32(unsigned* dst, size_t count, unsigned bits,
                         cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_KERNELS_H_
