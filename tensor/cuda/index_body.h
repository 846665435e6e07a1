#ifndef DTENSOR_TENSOR_CUDA_INDEX_BODY_H_
#define DTENSOR_TENSOR_CUDA_INDEX_BODY_H_

// Per-element bodies of the index kernels (dtensor/tensor/indexing.cc's
// IndexSelect, Gather and ScatterAdd, nn_functional.cc's EmbeddingBackward),
// shared by the CUDA launches and their host forms. Indices are i64 and
// already checked to lie in range on the host (EmbeddingBackward's: skipped
// when outside its rows); element `i` is the row-major position in the
// index's shape (IndexSelect: in the output's).

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// IndexSelect of contiguous x seen as [outer, size, inner] along its middle
// dim: out [outer, count, inner] (contiguous) at `i` takes x[o, rows[k], j].
template <typename T>
DT_HOST_DEVICE inline void IndexSelectElement(const T* x, const int64_t* rows,
                                              T* out, int64_t i, int64_t count,
                                              int64_t size, int64_t inner) {
  const int64_t j = i % inner;
  const int64_t k = (i / inner) % count;
  const int64_t o = i / (inner * count);
  out[i] = x[(o * size + rows[k]) * inner + j];
}

// Gather: out (contiguous, the index's shape) at `i` takes the element of x
// at the index's position on every dim but the gathered one, and picks[i] on
// it. `shape` walks the index's shape with x's strides, the gathered dim's
// zeroed (operand 0); `pick_stride` is x's stride on that dim.
template <typename T>
DT_HOST_DEVICE inline void GatherElement(const T* x, const int64_t* picks,
                                         T* out, const StridedShape<1>& shape,
                                         int64_t pick_stride, int64_t i) {
  int64_t offsets[1];
  OperandOffsetsAt(shape, i, offsets);
  out[i] = x[offsets[0] + picks[i] * pick_stride];
}

// ScatterAdd: adds src's element at the index's position `i` to the
// accumulator slot at that position on every dim but the scattered one, and
// targets[i] on it, by add(slot, value) (a plain += in the host form, an
// atomicAdd on the device). `shape` walks the index's shape with the
// accumulator's strides, the scattered dim's zeroed (operand 0), and src's
// strides (operand 1); A is the accumulator's type: T, or float for the
// 16-bit floats, which accumulate in a float buffer and round once.
template <typename A, typename T, typename AddFn>
DT_HOST_DEVICE inline void ScatterAddElement(const T* src,
                                             const int64_t* targets, A* acc,
                                             const StridedShape<2>& shape,
                                             int64_t target_stride, int64_t i,
                                             AddFn add) {
  int64_t offsets[2];
  OperandOffsetsAt(shape, i, offsets);
  add(acc + offsets[0] + targets[i] * target_stride,
      static_cast<A>(Load(src[offsets[1]])));
}

// EmbeddingBackward (dtensor/tensor/nn_functional.cc) as a sorted,
// segmented sum. Token i gets the sort key EmbeddingRowKey(indices[i]); a
// stable sort of the (key, i) pairs lists the tokens of each row together,
// in increasing position; row r's tokens are then the sorted positions
// [EmbeddingSegmentStart(r), EmbeddingSegmentStart(r + 1)), and
// EmbeddingSegmentSum adds their grad rows in that order: the CPU kernel's
// order, the same bits every run.

// The key of an index: its row relative to first_row when it lies in
// [first_row, first_row + num_rows), the rows of this table shard, else
// num_rows (after every row: the token is skipped). Requires: first_row >= 0.
DT_HOST_DEVICE inline uint64_t EmbeddingRowKey(int64_t index, int64_t first_row,
                                               int64_t num_rows) {
  if (index < first_row || index - first_row >= num_rows) {
    return static_cast<uint64_t>(num_rows);
  }
  return static_cast<uint64_t>(index - first_row);
}

// The low key bits a radix sort of the keys reads: every key (at most
// num_rows) is below 2^bits. At least 1. Requires: num_rows >= 0.
DT_HOST_DEVICE inline int EmbeddingKeyBits(int64_t num_rows) {
  int bits = 1;
  while (bits < 63 && (num_rows >> bits) != 0) ++bits;
  return bits;
}

// The first position k of the `count` sorted keys with keys[k] >= row (count
// when none): where row's segment starts.
DT_HOST_DEVICE inline int64_t EmbeddingSegmentStart(const uint64_t* keys,
                                                    int64_t count,
                                                    uint64_t row) {
  int64_t low = 0;
  int64_t high = count;
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (keys[mid] < row) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

// Element (row, j) of out [num_rows, width] (contiguous): the sum in A (float
// for the 16-bit floats, T otherwise) of grad[positions[k], j] (contiguous
// grad [count, width]) over row's segment [starts[row], starts[row + 1]) of
// the sorted positions, in that order, stored once as T (0 for a row that no
// token names).
template <typename A, typename T>
DT_HOST_DEVICE inline void EmbeddingSegmentSum(const T* grad,
                                               const int64_t* positions,
                                               const int64_t* starts, T* out,
                                               int64_t width, int64_t row,
                                               int64_t j) {
  A sum = A(0);
  for (int64_t k = starts[row]; k < starts[row + 1]; ++k) {
    sum += static_cast<A>(Load(grad[positions[k] * width + j]));
  }
  out[row * width + j] = Store<T>(sum);
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_INDEX_BODY_H_
