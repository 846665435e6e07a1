#include "dtensor/collectives/multiprocess/piece_geometry.h"

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {

int64_t ElementsPerIndex(absl::Span<const int64_t> shape, int64_t dim) {
  int64_t count = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d != dim) count *= shape[d];
  }
  return count;
}

bool PiecesAreRanges(const Tensor& tensor, int64_t dim) {
  if (!tensor.is_contiguous()) return false;
  for (int64_t d = 0; d < dim; ++d) {
    if (tensor.size(d) != 1) return false;
  }
  return true;
}

absl::StatusOr<Tensor> PackedBuffer(const Tensor& tensor, int64_t dim) {
  if (!tensor.defined()) return Tensor();
  if (PiecesAreRanges(tensor, dim)) return tensor.View({tensor.numel()});
  return Tensor::Empty({tensor.numel()}, tensor.dtype(), tensor.device());
}

std::vector<int64_t> PieceBytes(const Tensor& tensor, int64_t dim,
                                absl::Span<const int64_t> sizes) {
  const int64_t index_bytes = ElementsPerIndex(tensor.shape(), dim) *
                              static_cast<int64_t>(ElementSize(tensor.dtype()));
  std::vector<int64_t> bytes;
  for (int64_t size : sizes) bytes.push_back(size * index_bytes);
  return bytes;
}

absl::Status ForEachPackedPiece(
    const Tensor& packed, const Tensor& tensor, int64_t dim,
    absl::Span<const int64_t> sizes,
    absl::FunctionRef<absl::Status(const Tensor& piece, const Tensor& view)>
        fn) {
  int64_t start = 0;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    DT_ASSIGN_OR_RETURN(Tensor piece, tensor.Narrow(dim, start, size));
    start += size;
    if (piece.numel() == 0) continue;
    DT_ASSIGN_OR_RETURN(
        Tensor view,
        Tensor::FromStorage(packed.storage(), packed.dtype(), piece.shape(),
                            ContiguousStrides(piece.shape()),
                            packed.storage_offset() + offset));
    offset += piece.numel();
    DT_RETURN_IF_ERROR(fn(piece, view));
  }
  return absl::OkStatus();
}

}  // namespace dtensor
