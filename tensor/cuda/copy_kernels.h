#ifndef DTENSOR_TENSOR_CUDA_COPY_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_COPY_KERNELS_H_

// Launches of the copy kernels on a stream: fills of raw words, and the
// strided dtype conversions that copies and casts run. Each returns the
// launch error (cudaSuccess when the launch was accepted); pointers are device
// pointers.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include <cstddef>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// Sets the `count` elements of `element_bytes` (1, 2, 4 or 8) at device
// pointer `dst` to the low `element_bytes` bytes of `bits` on `stream`.
cudaError_t LaunchFill(void* dst, size_t count, uint64_t bits,
                       int element_bytes, cudaStream_t stream);

// out = x converted from `from` to `to` (operands 0: out, 1: x): casts and
// strided copies.
cudaError_t LaunchCast(ScalarType from, ScalarType to, const void* x, void* out,
                       const StridedShape<2>& shape, int64_t numel,
                       cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_COPY_KERNELS_H_
