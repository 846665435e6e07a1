#include "dtensor/collectives/argument_checks.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {
namespace {

// The [first, last] element offsets a non-empty view touches in its storage.
std::pair<int64_t, int64_t> ElementSpan(const Tensor& tensor) {
  int64_t first = tensor.storage_offset();
  int64_t last = tensor.storage_offset();
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    const int64_t reach = (tensor.shape()[d] - 1) * tensor.strides()[d];
    (reach < 0 ? first : last) += reach;
  }
  return {first, last};
}

}  // namespace

std::string TensorText(const Tensor& tensor) {
  if (!tensor.defined()) return "none";
  return absl::StrCat(std::string(DTypeName(tensor.dtype())),
                      ShapeToString(tensor.shape()));
}

absl::Status CheckTensor(const Tensor& tensor, absl::string_view name,
                         Device device, absl::string_view op) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", name, " is undefined"));
  }
  if (tensor.device() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", name, " is on ", tensor.device().ToString(),
                     " but the communicator works on ", device.ToString()));
  }
  return absl::OkStatus();
}

absl::Status CheckSameDType(const Tensor& a, const Tensor& b,
                            absl::string_view op) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": dtypes differ: ", TensorText(a), " vs ", TensorText(b)));
}

absl::Status CheckShape(const Tensor& tensor,
                        absl::Span<const int64_t> expected,
                        absl::string_view name, absl::string_view op) {
  if (absl::MakeConstSpan(tensor.shape()) == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", name, " has shape ", ShapeToString(tensor.shape()),
                   " but the arguments need ", ShapeToString(expected)));
}

absl::Status CheckReduceDType(ReduceOp reduce, DType dtype,
                              absl::string_view op) {
  if (reduce != ReduceOp::kAvg || IsFloatingPoint(dtype)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": avg needs a floating dtype, got ", std::string(DTypeName(dtype))));
}

absl::Status CheckGroupRank(int64_t rank, int64_t size, absl::string_view name,
                            absl::string_view op) {
  if (rank >= 0 && rank < size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", name, " ", rank, " is not a rank of a group of ", size));
}

absl::Status CheckDisjoint(const Tensor& input, const Tensor& output,
                           absl::string_view op) {
  if (input.storage() != output.storage() || input.numel() == 0 ||
      output.numel() == 0 || !input.is_contiguous() ||
      !output.is_contiguous()) {
    return absl::OkStatus();
  }
  const auto [in_first, in_last] = ElementSpan(input);
  const auto [out_first, out_last] = ElementSpan(output);
  if (in_last < out_first || out_last < in_first) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": output overlaps input (elements [", out_first, ", ", out_last,
      "] and [", in_first, ", ", in_last, "] of one storage)"));
}

absl::StatusOr<int64_t> NormalizeCollectiveDim(int64_t dim, int64_t ndim,
                                               absl::string_view op) {
  if (ndim == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": needs a tensor with at least one dim, got 0-d"));
  }
  absl::StatusOr<int64_t> normalized = NormalizeDim(dim, ndim);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", normalized.status().message()));
  }
  return normalized;
}

absl::StatusOr<std::vector<int64_t>> CompletePieceSizes(
    absl::Span<const int64_t> sizes, int64_t group_size, int64_t equal_size,
    absl::string_view op) {
  if (sizes.empty()) return std::vector<int64_t>(group_size, equal_size);
  if (static_cast<int64_t>(sizes.size()) != group_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", sizes.size(), " piece sizes [", absl::StrJoin(sizes, ", "),
        "] for a group of ", group_size));
  }
  for (int64_t size : sizes) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": negative piece size ", size, " in [",
                       absl::StrJoin(sizes, ", "), "]"));
    }
  }
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

absl::StatusOr<std::vector<int64_t>> EqualPieceSizes(int64_t total,
                                                     int64_t group_size,
                                                     absl::string_view op) {
  if (total % group_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": size ", total, " does not split into ", group_size,
                     " equal pieces; pass the piece sizes"));
  }
  return std::vector<int64_t>(group_size, total / group_size);
}

absl::StatusOr<std::vector<int64_t>> SplitPieceSizes(
    absl::Span<const int64_t> sizes, int64_t total, int64_t group_size,
    absl::string_view op) {
  if (sizes.empty()) return EqualPieceSizes(total, group_size, op);
  return CompletePieceSizes(sizes, group_size, 0, op);
}

int64_t SumOf(absl::Span<const int64_t> sizes) {
  int64_t sum = 0;
  for (int64_t size : sizes) sum += size;
  return sum;
}

bool AllEqual(absl::Span<const int64_t> sizes) {
  return std::adjacent_find(sizes.begin(), sizes.end(),
                            std::not_equal_to<>()) == sizes.end();
}

int64_t OffsetOf(absl::Span<const int64_t> sizes, int64_t index) {
  return SumOf(sizes.subspan(0, index));
}

Shape WithDimSize(absl::Span<const int64_t> shape, int64_t dim, int64_t size) {
  Shape result(shape.begin(), shape.end());
  result[dim] = size;
  return result;
}

}  // namespace dtensor
