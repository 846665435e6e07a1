#include "dtensor/tensor/cuda/index_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

template <typename T>
__global__ void EmbeddingKernel(const int64_t* indices, const T* table, T* out,
                                int64_t count, int64_t dim, int64_t num_rows) {
  const int64_t total = count * dim;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += step) {
    const int64_t row = indices[i / dim];
    const int64_t safe_row = row >= 0 && row < num_rows ? row : 0;
    out[i] = table[safe_row * dim + i % dim];
  }
}

// flag[0] = the largest ~0 - i over the bad positions i (0: none), so that
// it names the first bad position whatever order the threads run in.
struct CheckIndexAt {
  const int64_t* indices;
  int64_t bound;
  unsigned long long* flag;
  __device__ void operator()(int64_t i) const {
    const int64_t index = indices[i];
    if (index >= 0 && index < bound) return;
    atomicMax(flag, ~0ULL - static_cast<unsigned long long>(i));
  }
};

// flag[1] = the index at the first bad position that CheckIndexAt found.
__global__ void FirstBadIndexKernel(const int64_t* indices,
                                    unsigned long long* flag) {
  if (flag[0] != 0) {
    flag[1] = static_cast<unsigned long long>(indices[~0ULL - flag[0]]);
  }
}

template <typename T>
struct IndexSelectAt {
  const T* x;
  const int64_t* rows;
  T* out;
  int64_t count, size, inner;
  __device__ void operator()(int64_t i) const {
    IndexSelectElement(x, rows, out, i, count, size, inner);
  }
};

template <typename T>
struct GatherAt {
  const T* x;
  const int64_t* picks;
  T* out;
  StridedShape<1> shape;
  int64_t pick_stride;
  __device__ void operator()(int64_t i) const {
    GatherElement(x, picks, out, shape, pick_stride, i);
  }
};

template <typename A, typename T>
struct ScatterAddAt {
  const T* src;
  const int64_t* targets;
  A* acc;
  StridedShape<2> shape;
  int64_t target_stride;
  __device__ void operator()(int64_t i) const {
    ScatterAddElement(src, targets, acc, shape, target_stride, i,
                      AtomicAddFn());
  }
};

template <typename A, typename T>
struct RowIndexAddAt {
  const T* grad;
  const int64_t* indices;
  A* acc;
  int64_t first_row, num_rows, width;
  __device__ void operator()(int64_t e) const {
    RowIndexAddElement(grad, indices, acc, first_row, num_rows, width, e,
                       AtomicAddFn());
  }
};

}  // namespace

cudaError_t LaunchEmbedding(ScalarType type, const int64_t* indices,
                            const void* table, void* out, int64_t count,
                            int64_t dim, int64_t num_rows,
                            cudaStream_t stream) {
  if (count == 0 || dim == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    EmbeddingKernel<<<GridFor(count * dim), kThreads, 0, stream>>>(
        indices, static_cast<const T*>(table), static_cast<T*>(out), count, dim,
        num_rows);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCheckIndices(const int64_t* indices, int64_t count,
                               int64_t bound, unsigned long long* flag,
                               cudaStream_t stream) {
  const cudaError_t checked =
      LaunchForEachIndex(count, CheckIndexAt{indices, bound, flag}, stream);
  if (checked != cudaSuccess || count == 0) return checked;
  FirstBadIndexKernel<<<1, 1, 0, stream>>>(indices, flag);
  return cudaGetLastError();
}

cudaError_t LaunchIndexSelect(ScalarType type, const void* x,
                              const int64_t* rows, void* out, int64_t outer,
                              int64_t count, int64_t size, int64_t inner,
                              cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        outer * count * inner,
        IndexSelectAt<T>{static_cast<const T*>(x), rows, static_cast<T*>(out),
                         count, size, inner},
        stream);
  });
}

cudaError_t LaunchGather(ScalarType type, const void* x, const int64_t* picks,
                         void* out, const StridedShape<1>& shape,
                         int64_t pick_stride, int64_t count,
                         cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        count,
        GatherAt<T>{static_cast<const T*>(x), picks, static_cast<T*>(out),
                    shape, pick_stride},
        stream);
  });
}

cudaError_t LaunchScatterAdd(ScalarType src_type, const void* src,
                             const int64_t* targets, void* acc,
                             const StridedShape<2>& shape,
                             int64_t target_stride, int64_t count,
                             cudaStream_t stream) {
  return Dispatch(src_type, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return cudaErrorInvalidValue;
    } else {
      using A = Compute<T>;
      return LaunchForEachIndex(
          count,
          ScatterAddAt<A, T>{static_cast<const T*>(src), targets,
                             static_cast<A*>(acc), shape, target_stride},
          stream);
    }
  });
}

cudaError_t LaunchRowIndexAdd(ScalarType grad_type, const void* grad,
                              const int64_t* indices, void* acc, int64_t count,
                              int64_t width, int64_t first_row,
                              int64_t num_rows, cudaStream_t stream) {
  return DispatchFloating(grad_type, [&](auto tag) {
    using T = decltype(tag);
    using A = Compute<T>;
    return LaunchForEachIndex(
        count * width,
        RowIndexAddAt<A, T>{static_cast<const T*>(grad), indices,
                            static_cast<A*>(acc), first_row, num_rows, width},
        stream);
  });
}

}  // namespace dtensor::cuda
