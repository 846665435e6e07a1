#include "dtensor/collectives/gloo/piece_layout.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"

namespace dtensor {

absl::StatusOr<Tensor> PackPieces(const Tensor& tensor, int64_t dim,
                                  absl::Span<const int64_t> sizes) {
  if (PiecesAreRanges(tensor, dim)) return tensor.View({tensor.numel()});
  DT_ASSIGN_OR_RETURN(Tensor packed,
                      Tensor::Empty({tensor.numel()}, tensor.dtype()));
  DT_RETURN_IF_ERROR(ForEachPackedPiece(
      packed, tensor, dim, sizes, [](const Tensor& piece, const Tensor& view) {
        Tensor target = view;  // A view: writes go to `packed`.
        return target.CopyFrom(piece);
      }));
  return packed;
}

absl::Status UnpackPieces(const Tensor& packed, const Tensor& tensor,
                          int64_t dim, absl::Span<const int64_t> sizes) {
  return ForEachPackedPiece(packed, tensor, dim, sizes,
                            [](const Tensor& piece, const Tensor& view) {
                              Tensor target = piece;  // Writes go to `tensor`.
                              return target.CopyFrom(view);
                            });
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
