#ifndef DTENSOR_TENSOR_CUDA_LAUNCH_COMMON_CUH_
#define DTENSOR_TENSOR_CUDA_LAUNCH_COMMON_CUH_

// What the launch files (*_kernels.cu) share: the block size, the dispatch of
// a ScalarType to its storage type, the grid-stride loop over indices, the
// reduction of a block's values and the atomic adds. CUDA only (nvcc).

#include <cuda_runtime_api.h>
#include <stdint.h>

#include <type_traits>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// Threads per block of every launch.
inline constexpr int kThreads = 256;

// Blocks for `count` elements spread over a grid-stride loop (at least 1, at
// most 65535).
inline int GridFor(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < 65535 ? (wanted < 1 ? 1 : wanted) : 65535);
}

// Calls fn(T{}) with T the storage type of `type`.
template <typename Fn>
cudaError_t Dispatch(ScalarType type, Fn&& fn) {
  switch (type) {
#define DT_CUDA_DISPATCH_CASE(enumerator, storage) \
  case ScalarType::enumerator:                     \
    return fn(storage{});
    DT_CUDA_FOR_EACH_SCALAR_TYPE(DT_CUDA_DISPATCH_CASE)
#undef DT_CUDA_DISPATCH_CASE
  }
  return cudaErrorInvalidValue;
}

// Calls fn(In{}, Out{}) with In and Out the storage types of `in` and `out`.
template <typename Fn>
cudaError_t DispatchPair(ScalarType in, ScalarType out, Fn&& fn) {
  return Dispatch(in, [&](auto in_tag) {
    return Dispatch(out, [&](auto out_tag) { return fn(in_tag, out_tag); });
  });
}

// Raises `kernel`'s dynamic shared memory limit to all that the current
// device grants a block (less the kernel's static shared memory) and checks
// that `bytes` fit (an invalid configuration otherwise). The limit set is the
// same on every call: ranks that share a process launch one kernel
// concurrently, and a limit set to each launch's own need could drop below
// another launch's need between that launch's set and its start (which then
// fails as an invalid argument).
template <typename Kernel>
cudaError_t AllowSharedBytes(Kernel* kernel, int64_t bytes) {
  int device = 0;
  int limit = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) {
    error = cudaDeviceGetAttribute(
        &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  cudaFuncAttributes attributes;
  if (error == cudaSuccess) {
    error = cudaFuncGetAttributes(&attributes, kernel);
  }
  if (error != cudaSuccess) return error;
  const int64_t dynamic =
      limit - static_cast<int64_t>(attributes.sharedSizeBytes);
  if (bytes > dynamic) return cudaErrorInvalidConfiguration;
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(dynamic));
}

// Dispatch over the floating types only; others are an invalid value.
template <typename Fn>
cudaError_t DispatchFloating(ScalarType type, Fn&& fn) {
  return Dispatch(type, [&](auto tag) -> cudaError_t {
    if constexpr (std::is_floating_point_v<Compute<decltype(tag)>>) {
      return fn(tag);
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

// Combines the values of a block's threads (blockDim.x == kThreads) with
// `combine`; every thread gets the result.
template <typename A, typename Combine>
__device__ A BlockReduce(A value, Combine combine) {
  __shared__ alignas(8) unsigned char raw[kThreads * sizeof(double)];
  A* shared = reinterpret_cast<A*>(raw);
  __syncthreads();  // The buffer may still be read by a previous call.
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      shared[threadIdx.x] =
          combine(shared[threadIdx.x], shared[threadIdx.x + width]);
    }
    __syncthreads();
  }
  return shared[0];
}

// The sum of `value` over the 32 lanes of a warp, which every lane gets.
// Requires: every lane of the warp calls it (a full mask).
template <typename A>
__device__ A WarpSum(A value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

struct AddCombine {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

struct MaxCombine {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return MaxKeepingFirst(a, b);
  }
};

// True when every operand walks the elements in order (after the host merged
// the dims: one dim of stride 1 everywhere).
template <int N>
bool IsContiguous(const StridedShape<N>& shape) {
  if (shape.ndim == 0) return true;
  if (shape.ndim != 1) return false;
  for (int k = 0; k < N; ++k) {
    if (shape.strides[k][0] != 1) return false;
  }
  return true;
}

// Calls body(i) for every i < count, spread over the grid.
template <typename Body>
__global__ void ForEachIndexKernel(int64_t count, Body body) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += step) {
    body(i);
  }
}

template <typename Body>
cudaError_t LaunchForEachIndex(int64_t count, const Body& body,
                               cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  ForEachIndexKernel<<<GridFor(count), kThreads, 0, stream>>>(count, body);
  return cudaGetLastError();
}

// Calls element(offsets) for index i of a strided launch, with offsets[k]
// operand k's element offset of i in `shape`: i itself when every operand
// walks the elements in order, which spares the division by each dim.
template <int N, typename Element>
struct StridedAt {
  Element element;
  StridedShape<N> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    int64_t offsets[N];
    if (contiguous) {
      for (int k = 0; k < N; ++k) offsets[k] = i;
    } else {
      OperandOffsetsAt(shape, i, offsets);
    }
    element(offsets);
  }
};

// Calls element(offsets) for each of the `numel` indices of `shape`, spread
// over the grid (StridedAt).
template <int N, typename Element>
cudaError_t LaunchStrided(const StridedShape<N>& shape, int64_t numel,
                          const Element& element, cudaStream_t stream) {
  return LaunchForEachIndex(
      numel, StridedAt<N, Element>{element, shape, IsContiguous(shape)},
      stream);
}

// *slot += value, atomically, for the accumulator types of ScatterAdd and the
// attention backward.
struct AtomicAddFn {
  __device__ void operator()(float* slot, float value) const {
    atomicAdd(slot, value);
  }
  __device__ void operator()(double* slot, double value) const {
    atomicAdd(slot, value);
  }
  __device__ void operator()(int32_t* slot, int32_t value) const {
    atomicAdd(reinterpret_cast<int*>(slot), static_cast<int>(value));
  }
  // Two's complement: the unsigned sum wraps as the signed one does.
  __device__ void operator()(int64_t* slot, int64_t value) const {
    atomicAdd(reinterpret_cast<unsigned long long*>(slot),  // NOLINT
              static_cast<unsigned long long>(value));      // NOLINT
  }
};

// Whether `rows` blocks fit in grid dimension x (one block per row).
inline bool RowsFit(int64_t rows) { return rows <= 2147483647; }

// The frame of a one-block-per-row launch over a floating `type`: success
// with nothing launched for no rows, an invalid configuration for more rows
// than the grid holds, else launch(T{}) with T the storage type of `type`
// (which launches the kernel) and the launch's error.
template <typename Launch>
cudaError_t LaunchFloatingRows(ScalarType type, int64_t rows, Launch&& launch) {
  if (rows == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  return DispatchFloating(type, [&](auto tag) {
    launch(tag);
    return cudaGetLastError();
  });
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_LAUNCH_COMMON_CUH_
