#ifndef DTENSOR_COLLECTIVES_GLOO_PIECE_LAYOUT_H_
#define DTENSOR_COLLECTIVES_GLOO_PIECE_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensor/tensor.h"

namespace dtensor {

// Gloo moves flat byte ranges; a collective's pieces along a dim are flat
// ranges of a tensor only when it is contiguous and every dim before `dim`
// has size 1. Otherwise the pieces are staged: packed one after another
// (each row-major) into a contiguous buffer, or unpacked from one. CPU
// tensors.

// The elements of one index along `dim`: the product of the other dims.
int64_t ElementsPerIndex(absl::Span<const int64_t> shape, int64_t dim);

// Whether `tensor`'s pieces along `dim` are consecutive ranges of its
// memory, in order.
bool PiecesAreRanges(const Tensor& tensor, int64_t dim);

// The byte size of each piece of `sizes` along `dim` of a tensor of `shape`
// and `dtype`.
std::vector<int64_t> PieceBytes(absl::Span<const int64_t> shape, int64_t dim,
                                absl::Span<const int64_t> sizes, DType dtype);

// `tensor`'s pieces along `dim` (of `sizes`), each row-major, one after
// another in a new contiguous 1-d tensor; `tensor` itself (as a 1-d view)
// when they already are ranges.
absl::StatusOr<Tensor> PackPieces(const Tensor& tensor, int64_t dim,
                                  absl::Span<const int64_t> sizes);

// Copies consecutive row-major pieces of `packed` into `tensor`'s pieces
// along `dim` (of `sizes`).
absl::Status UnpackPieces(const Tensor& packed, const Tensor& tensor,
                          int64_t dim, absl::Span<const int64_t> sizes);

// Where a collective writes `output`: `output` itself when it is
// contiguous, else a contiguous scratch tensor that Finish copies over.
class OutputStage {
 public:
  static absl::StatusOr<OutputStage> For(const Tensor& output);
  const Tensor& buffer() const { return buffer_; }
  // Copies the buffer into the output when they differ.
  absl::Status Finish() const;

 private:
  OutputStage(Tensor output, Tensor buffer)
      : output_(std::move(output)), buffer_(std::move(buffer)) {}
  Tensor output_;
  Tensor buffer_;
};

// `tensor` or a contiguous copy; ResourceExhausted when there is no memory
// for the copy.
absl::StatusOr<Tensor> ContiguousInput(const Tensor& tensor);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_PIECE_LAYOUT_H_
