#ifndef DTENSOR_TENSOR_CUDA_INDEX_BODY_H_
#define DTENSOR_TENSOR_CUDA_INDEX_BODY_H_

// Per-element bodies of the index kernels (dtensor/tensor/indexing.cc's
// IndexSelect, Gather and ScatterAdd, nn_functional.cc's EmbeddingBackward),
// shared by the CUDA launches and their host forms. Indices are i64 and
// already checked to lie in range on the host; element `i` is the row-major
// position in the index's shape (IndexSelect: in the output's;
// EmbeddingBackward: in grad's).

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

// EmbeddingBackward's row index-add (dtensor/tensor/nn_functional.cc): the
// element e = i * width + j of contiguous grad [count, width] adds into
// acc[(indices[i] - first_row) * width + j] by add(slot, value) (a plain +=
// in the host form, an atomicAdd on the device) when indices[i] lies in
// [first_row, first_row + num_rows), the rows of this table shard, and is
// skipped otherwise. A is the accumulator's type as for ScatterAddElement.
// Visiting e in increasing order adds into each slot in the CPU kernel's
// order.
template <typename A, typename T, typename AddFn>
DT_HOST_DEVICE inline void RowIndexAddElement(const T* grad,
                                              const int64_t* indices, A* acc,
                                              int64_t first_row,
                                              int64_t num_rows, int64_t width,
                                              int64_t e, AddFn add) {
  const int64_t row = indices[e / width] - first_row;
  if (row < 0 || row >= num_rows) return;
  add(acc + row * width + e % width, static_cast<A>(Load(grad[e])));
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_INDEX_BODY_H_
