#ifndef DTENSOR_TENSOR_CUDA_MAP_LAUNCH_CUH_
#define DTENSOR_TENSOR_CUDA_MAP_LAUNCH_CUH_

// The launch of a map: every element of an iteration shape written from the
// elements at the same position of the other operands, by a functor fixed at
// compile time (one kernel per op and dtype, no switch per element). What the
// elementwise launches, the casts and the fused SwiGLU share. CUDA only
// (nvcc).
//
// Four kernels per map, picked at launch:
//  - contiguous operands whose pointers are aligned to a 16-byte vector, with
//    a floating (32- or 16-bit) first output: each thread moves 16 bytes of
//    the widest operand per load and store (4 f32, 8 bf16), the last
//    numel % kVec elements one by one;
//  - the same vectors along the rows of a broadcast or padded shape
//    (RowVectorizable: a bias [C] against [N, C], a column [N, 1], rows of a
//    larger buffer), an input broadcast along the row loaded once and
//    repeated, the offsets of each vector's first element from the strided
//    shape;
//  - otherwise (broadcast, strided, misaligned views, other dtypes) one
//    element per thread with the operands' offsets from the strided shape,
//    in 32-bit index math when numel and every operand's reach fit in int32,
//  - else in 64-bit index math.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {

// kVec elements of T, aligned to their size so that one instruction moves
// them.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

// Operand types T... (the first kOutputs written, the others read) and the
// functor `f`, called as f(T0*, T1*, ...) with a pointer to each operand's
// element (const for the inputs).
template <typename F, int kOutputs, typename... T>
struct Map {
  static constexpr int kOperands = sizeof...(T);
  static constexpr int kOutputCount = kOutputs;
  template <size_t K>
  using Type = std::tuple_element_t<K, std::tuple<T...>>;
  static constexpr size_t kWidest = std::max({sizeof(T)...});
  // Vectorized when the first output is a 32- or 16-bit float: the
  // instantiations of the bandwidth-bound training steps, and few enough
  // for the binary size.
  static constexpr bool kFloatOut = std::is_same_v<Type<0>, float> ||
                                    std::is_same_v<Type<0>, Bf16> ||
                                    std::is_same_v<Type<0>, F16>;
  static constexpr int kVec = kFloatOut ? static_cast<int>(16 / kWidest) : 1;
  using Indices = std::make_index_sequence<kOperands>;

  F f;
  void* data[kOperands];

  template <size_t K>
  __device__ auto* Ptr() const {
    using P = std::conditional_t<(K < kOutputs), Type<K>, const Type<K>>;
    return static_cast<P*>(data[K]);
  }

  // The element at operand offsets `at`.
  template <typename I, size_t... K>
  __device__ void At(const I* at, std::index_sequence<K...>) const {
    f((Ptr<K>() + at[K])...);
  }

  // Operand K's vector at element offset `at` (a multiple of kVec): loaded
  // for an input, its one element repeated when bit K of `repeated` is set
  // (an operand broadcast along the row), blank for an output.
  template <size_t K, typename I>
  __device__ Vec<Type<K>, kVec> Load(I at, unsigned repeated) const {
    Vec<Type<K>, kVec> vec{};
    if constexpr (K >= kOutputs) {
      if ((repeated >> K) & 1u) {
        const Type<K> value = Ptr<K>()[at];
#pragma unroll
        for (int j = 0; j < kVec; ++j) vec.v[j] = value;
      } else {
        vec = *reinterpret_cast<const Vec<Type<K>, kVec>*>(Ptr<K>() + at);
      }
    }
    return vec;
  }

  template <typename I, size_t... K, typename... V>
  __device__ void ApplyLoaded(const I* at, std::index_sequence<K...>,
                              V... vecs) const {
#pragma unroll
    for (int j = 0; j < kVec; ++j) f((&vecs.v[j])...);
    (StoreOutput<K>(at[K], vecs), ...);
  }

  template <size_t K, typename I, typename V>
  __device__ void StoreOutput(I at, const V& vec) const {
    if constexpr (K < kOutputs) {
      *reinterpret_cast<V*>(static_cast<Type<K>*>(data[K]) + at) = vec;
    }
  }

  // kVec elements from operand offsets `at` (RowVectorizable's vectors; every
  // offset the same for contiguous operands), the operands of `repeated`
  // broadcast along them.
  template <typename I, size_t... K>
  __device__ void VectorAt(const I* at, unsigned repeated,
                           std::index_sequence<K...> k) const {
    ApplyLoaded(at, k, Load<K>(at[K], repeated)...);
  }

  // Whether the data of every operand not in `repeated` is aligned to its
  // vector.
  template <size_t... K>
  bool Aligned(unsigned repeated, std::index_sequence<K...>) const {
    return (((repeated >> K) & 1u ||
             reinterpret_cast<uintptr_t>(data[K]) % (sizeof(Type<K>) * kVec) ==
                 0) &&
            ...);
  }
};

// A Map of functor `f` over operands `data` (outputs first).
template <int kOutputs, typename... T, typename F, typename... P>
Map<F, kOutputs, T...> MakeMap(F f, P*... data) {
  return Map<F, kOutputs, T...>{
      f, {const_cast<void*>(static_cast<const void*>(data))...}};
}

template <typename M>
__global__ void MapVectorKernel(int64_t vectors, int64_t numel, M map) {
  const int64_t first =
      blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t v = first; v < vectors; v += step) {
    int64_t at[M::kOperands];
    for (int k = 0; k < M::kOperands; ++k) at[k] = v * M::kVec;
    map.VectorAt(at, /*repeated=*/0u, typename M::Indices{});
  }
  // The tail (fewer than kVec elements), one per thread.
  const int64_t i = vectors * M::kVec + first;
  if (i < numel) {
    int64_t at[M::kOperands];
    for (int k = 0; k < M::kOperands; ++k) at[k] = i;
    map.At(at, typename M::Indices{});
  }
}

// The vectors of a RowVectorizable shape (numel a multiple of kVec): the
// operands' offsets of each vector's first element from the strided shape,
// the operands of `repeated` (stride 0 along the row) broadcast.
template <typename I, typename M>
__global__ void MapRowVectorKernel(int64_t vectors,
                                   StridedShape<M::kOperands, I> shape,
                                   unsigned repeated, M map) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += step) {
    I at[M::kOperands];
    OperandOffsetsAt(shape, static_cast<I>(v * M::kVec), at);
    map.VectorAt(at, repeated, typename M::Indices{});
  }
}

// The grid-stride counter stays 64-bit (an add); the offsets, whose
// divisions by each dim dominate, are computed in I.
template <typename I, typename M>
__global__ void MapStridedKernel(int64_t numel,
                                 StridedShape<M::kOperands, I> shape,
                                 bool contiguous, M map) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < numel; i += step) {
    I at[M::kOperands];
    if (contiguous) {
      for (int k = 0; k < M::kOperands; ++k) at[k] = static_cast<I>(i);
    } else {
      OperandOffsetsAt(shape, static_cast<I>(i), at);
    }
    map.At(at, typename M::Indices{});
  }
}

// Whether numel and the largest offset of every operand fit in int32.
template <int N>
bool FitsInt32(const StridedShape<N>& shape, int64_t numel) {
  constexpr int64_t kMax = 2147483647;
  if (numel > kMax) return false;
  for (int k = 0; k < N; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < shape.ndim; ++d) {
      const int64_t stride = shape.strides[k][d];
      reach += (shape.sizes[d] - 1) * (stride < 0 ? -stride : stride);
    }
    if (reach > kMax) return false;
  }
  return true;
}

template <typename I, int N>
StridedShape<N, I> Narrowed(const StridedShape<N>& shape) {
  StridedShape<N, I> narrow;
  narrow.ndim = shape.ndim;
  for (int d = 0; d < shape.ndim; ++d) {
    narrow.sizes[d] = static_cast<I>(shape.sizes[d]);
    for (int k = 0; k < N; ++k) {
      narrow.strides[k][d] = static_cast<I>(shape.strides[k][d]);
    }
  }
  return narrow;
}

// Blocks for `count` threads' work, one item each (the loops stride over
// the rest past the cap).
inline unsigned BlocksFor(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      wanted < 1 ? 1 : (wanted < (int64_t{1} << 20) ? wanted : 1 << 20));
}

// Runs `map` over the `numel` elements of `shape` (operand k's strides are
// shape.strides[k]) on `stream`; returns the launch error.
template <typename M>
cudaError_t LaunchMap(const M& map, const StridedShape<M::kOperands>& shape,
                      int64_t numel, cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  if constexpr (M::kVec > 1) {
    if (contiguous && map.Aligned(0u, typename M::Indices{})) {
      const int64_t vectors = numel / M::kVec;
      const int64_t tail = numel - vectors * M::kVec;
      MapVectorKernel<<<BlocksFor(vectors > tail ? vectors : tail), kThreads, 0,
                        stream>>>(vectors, numel, map);
      return cudaGetLastError();
    }
    const unsigned repeated = InnerBroadcastMask(shape);
    if (RowVectorizable(shape, M::kVec, M::kOutputCount) &&
        map.Aligned(repeated, typename M::Indices{})) {
      const int64_t vectors = numel / M::kVec;
      if (FitsInt32(shape, numel)) {
        MapRowVectorKernel<int32_t>
            <<<BlocksFor(vectors), kThreads, 0, stream>>>(
                vectors, Narrowed<int32_t>(shape), repeated, map);
      } else {
        MapRowVectorKernel<int64_t>
            <<<BlocksFor(vectors), kThreads, 0, stream>>>(vectors, shape,
                                                          repeated, map);
      }
      return cudaGetLastError();
    }
  }
  if (FitsInt32(shape, numel)) {
    MapStridedKernel<int32_t><<<GridFor(numel), kThreads, 0, stream>>>(
        numel, Narrowed<int32_t>(shape), contiguous, map);
  } else {
    MapStridedKernel<int64_t><<<GridFor(numel), kThreads, 0, stream>>>(
        numel, shape, contiguous, map);
  }
  return cudaGetLastError();
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_MAP_LAUNCH_CUH_
