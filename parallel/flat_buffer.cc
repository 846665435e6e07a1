#include "dtensor/parallel/flat_buffer.h"

#include <cstddef>

#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace parallel {
namespace {

// `part` and the piece of `flat` at `offset` of its size, viewed alike.
absl::StatusOr<Tensor> PieceOf(const Tensor& flat, int64_t offset,
                               const Tensor& part) {
  DT_ASSIGN_OR_RETURN(Tensor piece, flat.Narrow(0, offset, part.numel()));
  return piece.View(part.shape());
}

// Calls visit(r, part, offset) for each rank r and tensor k, rank by rank,
// with `part` the view of tensors[k]'s rows of rank r and `offset` its place
// in the flat layout.
template <typename Visit>
absl::Status ForEachRankRows(absl::Span<const Tensor> tensors,
                             absl::Span<const std::vector<ChunkRange>> rows,
                             Visit visit) {
  const size_t ranks = rows.empty() ? 0 : rows.front().size();
  int64_t offset = 0;
  for (size_t r = 0; r < ranks; ++r) {
    for (size_t k = 0; k < tensors.size(); ++k) {
      const ChunkRange kept = rows[k][r];
      if (kept.size == 0) continue;
      DT_ASSIGN_OR_RETURN(Tensor part,
                          tensors[k].Narrow(0, kept.offset, kept.size));
      DT_RETURN_IF_ERROR(visit(r, part, offset));
      offset += part.numel();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PackInOrder(absl::Span<const Tensor> tensors, Tensor& flat) {
  int64_t offset = 0;
  for (const Tensor& tensor : tensors) {
    DT_ASSIGN_OR_RETURN(Tensor piece, PieceOf(flat, offset, tensor));
    DT_RETURN_IF_ERROR(piece.CopyFrom(tensor));
    offset += tensor.numel();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> PackRowsByRank(
    absl::Span<const Tensor> tensors,
    absl::Span<const std::vector<ChunkRange>> rows, Tensor& flat) {
  std::vector<int64_t> sizes(rows.empty() ? 0 : rows.front().size(), 0);
  DT_RETURN_IF_ERROR(ForEachRankRows(
      tensors, rows,
      [&](size_t r, const Tensor& part, int64_t offset) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor piece, PieceOf(flat, offset, part));
        sizes[r] += part.numel();
        return piece.CopyFrom(part);
      }));
  return sizes;
}

absl::Status UnpackRowsByRank(const Tensor& flat,
                              absl::Span<const std::vector<ChunkRange>> rows,
                              absl::Span<const Tensor> tensors) {
  return ForEachRankRows(
      tensors, rows, [&](size_t, Tensor& part, int64_t offset) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor piece, PieceOf(flat, offset, part));
        return part.CopyFrom(piece);  // A view of the caller's tensor.
      });
}

}  // namespace parallel
}  // namespace dtensor
