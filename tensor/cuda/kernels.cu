#include "tensor/cuda/kernels.h"

namespace dtensor::cuda {
namespace {

__global__ void Fill32Kernel(unsigned* dst, size_t count, unsigned bits) {
  const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    dst[i] = bits;
  }
}

}  // namespace

cudaError_t LaunchFill32(unsigned* dst, size_t count, unsigned bits,
                         cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const size_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 4096 ? wanted : 4096);
  Fill32Kernel<<<blocks, kThreads, 0, stream>>>(dst, count, bits);
  return cudaGetLastError();
}

}  // namespace dtensor::cuda
