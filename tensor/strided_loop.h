#ifndef DTENSOR_TENSOR_STRIDED_LOOP_H_
#define DTENSOR_TENSOR_STRIDED_LOOP_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace dtensor {

// Element offsets (or steps) of N operands, one entry per operand.
template <size_t N>
using OperandOffsets = std::array<int64_t, N>;

// Visits every element of N strided operands that share `shape`, in row-major
// order, as 2-D blocks of rows: calls
//   block(offsets, steps, count, row_steps, rows)
// once per block, where element j of row i (j < count, i < rows) of operand
// k lies at offsets[k] + i * row_steps[k] + j * steps[k]. `strides[k]` are
// operand k's element strides (0 for broadcast dims) and `offsets[k]` the
// offset of its element [0, ..., 0].
// Requires: every strides[k] has shape.size() entries.
// Size-1 dims are dropped and adjacent
// dims that every operand can walk with a single stride are merged first, so
// operands that are all contiguous form a single row with unit steps, and a
// row- or column-broadcast operand of a 2-D shape one block (its row_steps
// or steps 0). Nothing is called when `shape` has a zero; a 0-d shape gives
// one block of one element.
template <size_t N, typename BlockFn>
void ForEachStridedBlock(
    absl::Span<const int64_t> shape,
    const std::array<absl::Span<const int64_t>, N>& strides,
    OperandOffsets<N> offsets, BlockFn&& block) {
  // The coalesced dims, outermost first.
  absl::InlinedVector<int64_t, 8> sizes;
  absl::InlinedVector<OperandOffsets<N>, 8> dim_strides;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    OperandOffsets<N> stride;
    for (size_t k = 0; k < N; ++k) stride[k] = strides[k][d];
    bool mergeable = !sizes.empty();
    for (size_t k = 0; k < N && mergeable; ++k) {
      mergeable = dim_strides.back()[k] == stride[k] * shape[d];
    }
    if (mergeable) {
      sizes.back() *= shape[d];
      dim_strides.back() = stride;
    } else {
      sizes.push_back(shape[d]);
      dim_strides.push_back(stride);
    }
  }
  // Two dims at least: a single row of size 1 stands for the missing ones.
  while (sizes.size() < 2) {
    sizes.insert(sizes.begin(), 1);
    dim_strides.insert(dim_strides.begin(), OperandOffsets<N>{});
  }
  const int inner = static_cast<int>(sizes.size()) - 1;
  const int outer = inner - 1;
  absl::InlinedVector<int64_t, 8> counter(outer, 0);
  while (true) {
    block(offsets, dim_strides[inner], sizes[inner], dim_strides[outer],
          sizes[outer]);
    int d = outer - 1;
    for (; d >= 0; --d) {
      if (++counter[d] < sizes[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += dim_strides[d][k];
        break;
      }
      counter[d] = 0;
      for (size_t k = 0; k < N; ++k) {
        offsets[k] -= dim_strides[d][k] * (sizes[d] - 1);
      }
    }
    if (d < 0) return;
  }
}

// Like ForEachStridedBlock, one row at a time: calls `run(offsets, steps,
// count)` once per innermost run (the rows of the blocks, in order).
template <size_t N, typename RunFn>
void ForEachStridedRun(absl::Span<const int64_t> shape,
                       const std::array<absl::Span<const int64_t>, N>& strides,
                       const OperandOffsets<N>& offsets, RunFn&& run) {
  ForEachStridedBlock<N>(
      shape, strides, offsets,
      [&run](OperandOffsets<N> row, const OperandOffsets<N>& steps,
             int64_t count, const OperandOffsets<N>& row_steps, int64_t rows) {
        for (int64_t i = 0; i < rows; ++i) {
          run(static_cast<const OperandOffsets<N>&>(row), steps, count);
          for (size_t k = 0; k < N; ++k) row[k] += row_steps[k];
        }
      });
}
// Like ForEachStridedRun, but calls `fn(offsets)` once per element.
template <size_t N, typename ElementFn>
void ForEachStridedElement(
    absl::Span<const int64_t> shape,
    const std::array<absl::Span<const int64_t>, N>& strides,
    const OperandOffsets<N>& offsets, ElementFn&& fn) {
  ForEachStridedRun<N>(shape, strides, offsets,
                       [&fn](OperandOffsets<N> element,
                             const OperandOffsets<N>& steps, int64_t count) {
                         for (int64_t j = 0; j < count; ++j) {
                           fn(static_cast<const OperandOffsets<N>&>(element));
                           for (size_t k = 0; k < N; ++k)
                             element[k] += steps[k];
                         }
                       });
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_STRIDED_LOOP_H_
