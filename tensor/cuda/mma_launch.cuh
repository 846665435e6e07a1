#ifndef DTENSOR_TENSOR_CUDA_MMA_LAUNCH_CUH_
#define DTENSOR_TENSOR_CUDA_MMA_LAUNCH_CUH_

// What the launches of the tensor-core attention kernels share: the dispatch
// of a 16-bit ScalarType and a head dim to the compiled kernels, and a launch
// with dynamic shared memory. CUDA only (nvcc).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include <type_traits>

#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {

// Calls fn(H{}, std::integral_constant<int, D>{}) with H the 16-bit type of
// `type` (__nv_bfloat16 or __half) and D the head dim the kernels are
// compiled for (64 or 128; the columns past e staged as zeros). Errors:
// cudaErrorInvalidValue for any other type.
template <typename Fn>
cudaError_t DispatchMma(ScalarType type, int64_t e, Fn&& fn) {
  const auto with_type = [&](auto tag) {
    if (e <= 64) return fn(tag, std::integral_constant<int, 64>());
    return fn(tag, std::integral_constant<int, 128>());
  };
  if (type == ScalarType::kBF16) return with_type(__nv_bfloat16());
  if (type == ScalarType::kF16) return with_type(__half());
  return cudaErrorInvalidValue;
}

// kernel<<<blocks, threads, bytes, stream>>>(args) after raising its shared
// memory limit (AllowSharedBytes); nothing for no block. Errors: an invalid
// configuration past 2^31 - 1 blocks or `bytes` over the device's limit.
template <typename Kernel, typename Args>
cudaError_t LaunchMma(Kernel* kernel, const Args& args, int64_t blocks,
                      int threads, int bytes, cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  if (blocks > 2147483647) return cudaErrorInvalidConfiguration;
  const cudaError_t error = AllowSharedBytes(kernel, bytes);
  if (error != cudaSuccess) return error;
  kernel<<<static_cast<unsigned>(blocks), threads, bytes, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_MMA_LAUNCH_CUH_
