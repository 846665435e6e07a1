#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/nn_functional_kernels.h"
#include "dtensor/tensor/cuda/random_body.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {
namespace {

template <typename T>
__global__ void SoftmaxKernel(const T* x, T* out, int64_t n, int64_t inner,
                              bool log) {
  const int64_t outer_index = blockIdx.x / inner;
  const int64_t inner_index = blockIdx.x % inner;
  const int64_t base = outer_index * n * inner + inner_index;
  const Row<T> row{x + base, n, inner};
  const int lane = threadIdx.x;
  const auto max =
      BlockReduce(SoftmaxMaxPartial(row, lane, kThreads), MaxCombine());
  const double sum =
      BlockReduce(SoftmaxSumPartial(row, max, lane, kThreads), AddCombine());
  SoftmaxWrite(row, out + base, max, sum, log, lane, kThreads);
}

template <typename T>
__global__ void RotaryKernel(const T* x, T* out, const double* cos_table,
                             const double* sin_table, int64_t outer,
                             int64_t seq, int64_t heads, int64_t half) {
  const int64_t pairs = outer * seq * heads * half;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       p < pairs; p += step) {
    const int64_t i = p % half;
    const int64_t head_row = p / half;  // (o * seq + s) * heads + h
    const int64_t s = (head_row / heads) % seq;
    const int64_t base = head_row * 2 * half;
    RotatePair(x + base, out + base, i, half, cos_table[s * half + i],
               sin_table[s * half + i]);
  }
}

template <typename T>
struct DropoutAt {
  const T* x;
  T* out;
  StridedShape<1> positions;
  uint64_t base, seed;
  double p, scale;
  __device__ void operator()(int64_t i) const {
    DropoutElement(x, out, positions, base, seed, p, scale, i);
  }
};

}  // namespace

cudaError_t LaunchSoftmax(ScalarType type, const void* x, void* out,
                          int64_t outer, int64_t n, int64_t inner, bool log,
                          cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (n == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    SoftmaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(out), n, inner, log);
  });
}

cudaError_t LaunchRotary(ScalarType type, const void* x, void* out,
                         const double* cos_table, const double* sin_table,
                         int64_t outer, int64_t seq, int64_t heads,
                         int64_t half, cudaStream_t stream) {
  const int64_t pairs = outer * seq * heads * half;
  if (pairs == 0) return cudaSuccess;
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    RotaryKernel<<<GridFor(pairs), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(out), cos_table, sin_table,
        outer, seq, heads, half);
    return cudaGetLastError();
  });
}

cudaError_t LaunchDropout(ScalarType type, const void* x, void* out,
                          const StridedShape<1>& positions, uint64_t base,
                          uint64_t seed, double p, double scale, int64_t numel,
                          cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        numel,
        DropoutAt<T>{static_cast<const T*>(x), static_cast<T*>(out), positions,
                     base, seed, p, scale},
        stream);
  });
}

}  // namespace dtensor::cuda
