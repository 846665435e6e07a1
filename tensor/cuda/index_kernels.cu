#include <cub/device/device_radix_sort.cuh>

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

// *scratch = the largest ~0 - i over the bad positions i (0: none), so
// that it names the first bad position whatever order the threads run in.
struct CheckIndexAt {
  const int64_t* indices;
  int64_t bound;
  unsigned long long* scratch;
  __device__ void operator()(int64_t i) const {
    const int64_t index = indices[i];
    if (index >= 0 && index < bound) return;
    atomicMax(scratch, ~0ULL - static_cast<unsigned long long>(i));
  }
};

// The report of CheckIndexAt's scratch word: the word, and the index at the
// first bad position (0 when none); the scratch word back to 0.
__global__ void ReportBadIndexKernel(const int64_t* indices,
                                     unsigned long long* scratch,
                                     unsigned long long* report) {
  const unsigned long long found = *scratch;
  report[0] = found;
  report[1] = found != 0
                  ? static_cast<unsigned long long>(indices[~0ULL - found])
                  : 0ULL;
  *scratch = 0;
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

// Key and position of token i (EmbeddingRowKey), the pairs to sort.
struct SortPairAt {
  const int64_t* indices;
  uint64_t* keys;
  int64_t* positions;
  int64_t first_row, num_rows;
  __device__ void operator()(int64_t i) const {
    keys[i] = EmbeddingRowKey(indices[i], first_row, num_rows);
    positions[i] = i;
  }
};

// starts[row] for row <= num_rows: where row's segment of the sorted keys
// begins (starts[num_rows] ends the last row's).
struct SegmentStartAt {
  const uint64_t* keys;
  int64_t count;
  int64_t* starts;
  __device__ void operator()(int64_t row) const {
    starts[row] =
        EmbeddingSegmentStart(keys, count, static_cast<uint64_t>(row));
  }
};

// Every element of out [num_rows, width]: rows over the grid's y (strided),
// columns over its x, so that a block reads one row's segment bounds.
template <typename A, typename T>
__global__ void SegmentSumKernel(const T* grad, const int64_t* positions,
                                 const int64_t* starts, T* out,
                                 int64_t num_rows, int64_t width) {
  const int64_t column_step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t row = blockIdx.y; row < num_rows; row += gridDim.y) {
    for (int64_t j =
             blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
         j < width; j += column_step) {
      EmbeddingSegmentSum<A>(grad, positions, starts, out, width, row, j);
    }
  }
}

// Bytes rounded up to a multiple of 256, so that every piece of the scratch
// starts 256-byte aligned relative to its base.
size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The byte offsets of EmbeddingBackward's scratch pieces: the keys and the
// positions before and after the sort, the num_rows + 1 segment starts, then
// cub's temporary storage of `sort_bytes`; `total` bytes in all.
struct ScratchLayout {
  size_t keys_in, keys_out, positions_in, positions_out, starts, sort, total;
};

ScratchLayout LayoutFor(int64_t count, int64_t num_rows, size_t sort_bytes) {
  const size_t pairs = Aligned(static_cast<size_t>(count) * 8);
  ScratchLayout layout;
  layout.keys_in = 0;
  layout.keys_out = pairs;
  layout.positions_in = 2 * pairs;
  layout.positions_out = 3 * pairs;
  layout.starts = 4 * pairs;
  layout.sort = layout.starts + Aligned(static_cast<size_t>(num_rows + 1) * 8);
  layout.total = layout.sort + Aligned(sort_bytes);
  return layout;
}

// cub's sort of the pairs; with null temp_storage, its temporary storage
// size into `temp_bytes` (no work done).
cudaError_t SortPairs(void* temp_storage, size_t& temp_bytes,
                      const uint64_t* keys_in, uint64_t* keys_out,
                      const int64_t* positions_in, int64_t* positions_out,
                      int64_t count, int64_t num_rows, cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(
      temp_storage, temp_bytes, keys_in, keys_out, positions_in, positions_out,
      count, 0, EmbeddingKeyBits(num_rows), stream);
}

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
                               int64_t bound, unsigned long long* scratch,
                               unsigned long long* report,
                               cudaStream_t stream) {
  const cudaError_t checked =
      LaunchForEachIndex(count, CheckIndexAt{indices, bound, scratch}, stream);
  if (checked != cudaSuccess) return checked;
  ReportBadIndexKernel<<<1, 1, 0, stream>>>(indices, scratch, report);
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

cudaError_t EmbeddingBackwardScratchBytes(int64_t count, int64_t num_rows,
                                          size_t* bytes) {
  size_t sort_bytes = 0;
  const cudaError_t error = SortPairs(nullptr, sort_bytes, nullptr, nullptr,
                                      nullptr, nullptr, count, num_rows, 0);
  *bytes = LayoutFor(count, num_rows, sort_bytes).total;
  return error;
}

cudaError_t LaunchEmbeddingBackward(ScalarType grad_type, const void* grad,
                                    const int64_t* indices, void* out,
                                    int64_t count, int64_t width,
                                    int64_t first_row, int64_t num_rows,
                                    void* scratch, size_t scratch_bytes,
                                    cudaStream_t stream) {
  size_t sort_bytes = 0;
  cudaError_t error = SortPairs(nullptr, sort_bytes, nullptr, nullptr, nullptr,
                                nullptr, count, num_rows, stream);
  const ScratchLayout layout = LayoutFor(count, num_rows, sort_bytes);
  if (error != cudaSuccess) return error;
  if (layout.total > scratch_bytes) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<uint64_t*>(base + layout.keys_in);
  auto* keys_out = reinterpret_cast<uint64_t*>(base + layout.keys_out);
  auto* positions_in = reinterpret_cast<int64_t*>(base + layout.positions_in);
  auto* positions_out = reinterpret_cast<int64_t*>(base + layout.positions_out);
  auto* starts = reinterpret_cast<int64_t*>(base + layout.starts);
  error = LaunchForEachIndex(
      count, SortPairAt{indices, keys_in, positions_in, first_row, num_rows},
      stream);
  if (error != cudaSuccess) return error;
  error = SortPairs(base + layout.sort, sort_bytes, keys_in, keys_out,
                    positions_in, positions_out, count, num_rows, stream);
  if (error != cudaSuccess) return error;
  error = LaunchForEachIndex(num_rows + 1,
                             SegmentStartAt{keys_out, count, starts}, stream);
  if (error != cudaSuccess) return error;
  return DispatchFloating(grad_type, [&](auto tag) {
    using T = decltype(tag);
    const int64_t column_blocks = (width + kThreads - 1) / kThreads;
    const dim3 grid(
        static_cast<unsigned>(column_blocks < 65535 ? column_blocks : 65535),
        static_cast<unsigned>(num_rows < 65535 ? num_rows : 65535));
    SegmentSumKernel<Compute<T>><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(grad), positions_out, starts,
        static_cast<T*>(out), num_rows, width);
    return cudaGetLastError();
  });
}

}  // namespace dtensor::cuda
