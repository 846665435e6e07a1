#include "collectives/gloo/piece_layout.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/argument_checks.h"
#include "tensor/status_macros.h"

namespace dtensor {
namespace {

// A row-major view of `shape` at element `offset` of `packed`'s storage.
absl::StatusOr<Tensor> PackedView(const Tensor& packed, const Shape& shape,
                                  int64_t offset) {
  return Tensor::FromStorage(packed.storage(), packed.dtype(), shape,
                             ContiguousStrides(shape),
                             packed.storage_offset() + offset);
}

// Calls `fn(piece view of tensor, row-major view in packed)` for each
// non-empty piece.
template <typename Fn>
absl::Status ForEachPiece(const Tensor& packed, const Tensor& tensor,
                          int64_t dim, absl::Span<const int64_t> sizes, Fn fn) {
  int64_t start = 0;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    DT_ASSIGN_OR_RETURN(Tensor piece, tensor.Narrow(dim, start, size));
    start += size;
    if (piece.numel() == 0) continue;
    DT_ASSIGN_OR_RETURN(Tensor flat, PackedView(packed, piece.shape(), offset));
    offset += piece.numel();
    DT_RETURN_IF_ERROR(fn(piece, flat));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> PackPieces(const Tensor& tensor, int64_t dim,
                                  absl::Span<const int64_t> sizes) {
  if (PiecesAreRanges(tensor, dim)) return tensor.View({tensor.numel()});
  DT_ASSIGN_OR_RETURN(Tensor packed,
                      Tensor::Empty({tensor.numel()}, tensor.dtype()));
  DT_RETURN_IF_ERROR(ForEachPiece(
      packed, tensor, dim, sizes,
      [](const Tensor& piece, Tensor flat) { return flat.CopyFrom(piece); }));
  return packed;
}

absl::Status UnpackPieces(const Tensor& packed, const Tensor& tensor,
                          int64_t dim, absl::Span<const int64_t> sizes) {
  return ForEachPiece(
      packed, tensor, dim, sizes,
      [](Tensor piece, const Tensor& flat) { return piece.CopyFrom(flat); });
}

absl::StatusOr<OutputStage> OutputStage::For(const Tensor& output) {
  if (output.is_contiguous()) return OutputStage(output, output);
  DT_ASSIGN_OR_RETURN(Tensor buffer,
                      Tensor::Empty(output.shape(), output.dtype()));
  return OutputStage(output, std::move(buffer));
}

absl::Status OutputStage::Finish() const {
  if (buffer_.storage() == output_.storage()) return absl::OkStatus();
  Tensor target = output_;  // A view: writes go to the caller's elements.
  return target.CopyFrom(buffer_);
}

absl::StatusOr<Tensor> ContiguousInput(const Tensor& tensor) {
  Tensor contiguous = tensor.Contiguous();
  if (!contiguous.defined()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no memory for a contiguous copy of ", TensorText(tensor)));
  }
  return contiguous;
}

}  // namespace dtensor
