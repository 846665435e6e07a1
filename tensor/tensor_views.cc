#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/tensor/tensor_internal.h"

// Tensor's views: new shapes and strides over the same storage, never a copy
// (Reshape and Flatten copy only when no strides can describe the result).
namespace dtensor {
namespace {

// `shape` with one -1 entry replaced so that it holds `numel` elements.
absl::StatusOr<Shape> InferShape(absl::Span<const int64_t> shape, int64_t numel,
                                 absl::string_view op) {
  Shape inferred(shape.begin(), shape.end());
  int64_t known = 1;
  int infer_at = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer_at >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, ": shape ", ShapeToString(shape), " has more than one -1"));
      }
      infer_at = static_cast<int>(d);
    } else if (shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": invalid size ", shape[d], " in shape ", ShapeToString(shape)));
    } else if (__builtin_mul_overflow(known, shape[d], &known)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": shape ", ShapeToString(shape), " has too many elements"));
    }
  }
  if (infer_at >= 0 && known != 0 && numel % known == 0) {
    inferred[infer_at] = numel / known;
    return inferred;
  }
  if (infer_at < 0 && known == numel) return inferred;
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": shape ", ShapeToString(shape), " is invalid for ",
                   numel, " elements"));
}

// Strides that view a tensor of `old_shape`/`old_strides` as `new_shape` (same
// element count), or nullopt when no strides can: torch's computeStride. Dims
// are viewable when each run of old dims that is contiguous in memory maps
// onto whole new dims.
std::optional<Strides> ViewStrides(absl::Span<const int64_t> old_shape,
                                   absl::Span<const int64_t> old_strides,
                                   absl::Span<const int64_t> new_shape) {
  const int64_t new_ndim = static_cast<int64_t>(new_shape.size());
  if (old_shape.empty()) return Strides(new_ndim, 1);
  if (NumElements(old_shape) == 0) return ContiguousStrides(new_shape);
  Strides new_strides(new_ndim);
  int64_t view_d = new_ndim - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_shape.size()) - 1;
       tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    const bool chunk_ends =
        tensor_d == 0 ||
        (old_shape[tensor_d - 1] != 1 &&
         old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 &&
           (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// InvalidArgument "<op>: <name> <value> must be positive" unless value > 0.
absl::Status CheckPositive(absl::string_view op, absl::string_view name,
                           int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", name, " ", value, " must be positive"));
}

}  // namespace

using internal::CheckedNumElements;
using internal::ContiguousCopy;

// ---- Views. ----

Tensor Tensor::MakeView(Shape shape, Strides strides,
                        int64_t storage_offset) const {
  Tensor view = *this;
  view.shape_ = std::move(shape);
  view.strides_ = std::move(strides);
  view.storage_offset_ = storage_offset;
  return view;
}

absl::StatusOr<Tensor> Tensor::Narrow(int64_t dim, int64_t start,
                                      int64_t length) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  const int64_t size = shape_[d];
  if (start < -size || start > size) {
    return absl::OutOfRangeError(absl::StrCat("Narrow: start ", start,
                                              " is out of range for dim ", dim,
                                              " of size ", size));
  }
  if (start < 0) start += size;
  if (length < 0 || length > size - start) {
    return absl::OutOfRangeError(
        absl::StrCat("Narrow: length ", length, " from start ", start,
                     " does not fit dim ", dim, " of size ", size));
  }
  Shape shape = shape_;
  shape[d] = length;
  return MakeView(std::move(shape), strides_,
                  storage_offset_ + start * strides_[d]);
}

absl::StatusOr<Tensor> Tensor::Slice(int64_t dim, int64_t start, int64_t end,
                                     int64_t step) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  DT_RETURN_IF_ERROR(CheckPositive("Slice", "step", step));
  const int64_t size = shape_[d];
  auto clamp = [size](int64_t index) {
    if (index < 0) index += size;
    return std::clamp<int64_t>(index, 0, size);
  };
  start = clamp(start);
  end = std::max(clamp(end), start);
  const int64_t length = end == start ? 0 : (end - start - 1) / step + 1;
  Shape shape = shape_;
  Strides strides = strides_;
  shape[d] = length;
  strides[d] *= step;
  return MakeView(std::move(shape), std::move(strides),
                  storage_offset_ + start * strides_[d]);
}

absl::StatusOr<Tensor> Tensor::Select(int64_t dim, int64_t index) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  const int64_t size = shape_[d];
  if (index < -size || index >= size) {
    return absl::OutOfRangeError(absl::StrCat("Select: index ", index,
                                              " is out of range for dim ", dim,
                                              " of size ", size));
  }
  if (index < 0) index += size;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return MakeView(std::move(shape), std::move(strides),
                  storage_offset_ + index * strides_[d]);
}

absl::StatusOr<Tensor> Tensor::Transpose(int64_t dim0, int64_t dim1) const {
  DT_ASSIGN_OR_RETURN(const int64_t d0, NormalizeDim(dim0, dim()));
  DT_ASSIGN_OR_RETURN(const int64_t d1, NormalizeDim(dim1, dim()));
  Shape shape = shape_;
  Strides strides = strides_;
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return MakeView(std::move(shape), std::move(strides), storage_offset_);
}

absl::StatusOr<Tensor> Tensor::Permute(absl::Span<const int64_t> dims) const {
  if (static_cast<int64_t>(dims.size()) != dim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Permute: dims ", ShapeToString(dims), " are not a permutation of the ",
        dim(), " dims of ", ShapeToString(shape_)));
  }
  Shape shape(dims.size());
  Strides strides(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dims[i], dim()));
    if (used[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Permute: dims ", ShapeToString(dims), " repeat dim ", dims[i]));
    }
    used[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return MakeView(std::move(shape), std::move(strides), storage_offset_);
}

absl::StatusOr<Tensor> Tensor::Expand(absl::Span<const int64_t> shape) const {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  if (ndim < dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expand: shape ", ShapeToString(shape),
                     " has fewer dims than ", ShapeToString(shape_)));
  }
  const int64_t leading = ndim - dim();
  Shape expanded(ndim);
  Strides strides(ndim, 0);
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t size = shape[i];
    if (i < leading) {
      if (size < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Expand: new leading dim ", i, " of ",
                         ShapeToString(shape), " has size ", size));
      }
      expanded[i] = size;
      continue;
    }
    const int64_t old_size = shape_[i - leading];
    if (size == -1 || size == old_size) {
      expanded[i] = old_size;
      strides[i] = strides_[i - leading];
    } else if (old_size == 1 && size >= 0) {
      expanded[i] = size;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("Expand: cannot expand ", ShapeToString(shape_), " to ",
                       ShapeToString(shape), ": dim ", i, " has size ",
                       old_size, ", not 1 or ", size));
    }
  }
  DT_RETURN_IF_ERROR(CheckedNumElements(expanded, "Expand").status());
  return MakeView(std::move(expanded), std::move(strides), storage_offset_);
}

Tensor Tensor::Squeeze() const {
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (shape_[d] == 1) continue;
    shape.push_back(shape_[d]);
    strides.push_back(strides_[d]);
  }
  return MakeView(std::move(shape), std::move(strides), storage_offset_);
}

absl::StatusOr<Tensor> Tensor::Squeeze(int64_t dim) const {
  // As in torch, a 0-d tensor takes dim 0 (or -1) as if it were 1-d.
  if (this->dim() == 0) {
    DT_RETURN_IF_ERROR(NormalizeDim(dim, 1).status());
    return *this;
  }
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  if (shape_[d] != 1) return *this;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return MakeView(std::move(shape), std::move(strides), storage_offset_);
}

absl::StatusOr<Tensor> Tensor::Unsqueeze(int64_t dim) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim() + 1));
  Shape shape = shape_;
  Strides strides = strides_;
  const int64_t stride = d < this->dim() ? shape_[d] * strides_[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return MakeView(std::move(shape), std::move(strides), storage_offset_);
}

absl::StatusOr<Tensor> Tensor::View(absl::Span<const int64_t> shape) const {
  DT_ASSIGN_OR_RETURN(Shape inferred, InferShape(shape, numel(), "View"));
  std::optional<Strides> strides = ViewStrides(shape_, strides_, inferred);
  if (!strides.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("View: shape ", ShapeToString(shape_), " with strides ",
                     ShapeToString(strides_), " cannot be viewed as ",
                     ShapeToString(inferred), " (use Reshape)"));
  }
  return MakeView(std::move(inferred), *std::move(strides), storage_offset_);
}

absl::StatusOr<Tensor> Tensor::Reshape(absl::Span<const int64_t> shape) const {
  DT_ASSIGN_OR_RETURN(Shape inferred, InferShape(shape, numel(), "Reshape"));
  if (std::optional<Strides> strides =
          ViewStrides(shape_, strides_, inferred)) {
    return MakeView(std::move(inferred), *std::move(strides), storage_offset_);
  }
  DT_ASSIGN_OR_RETURN(Tensor copy, ContiguousCopy(*this));
  Strides strides = ContiguousStrides(inferred);
  return copy.MakeView(std::move(inferred), std::move(strides), 0);
}

absl::StatusOr<Tensor> Tensor::Flatten(int64_t start_dim,
                                       int64_t end_dim) const {
  if (dim() == 0) {
    // As in torch, a 0-d tensor takes dims 0 and -1 as if it were 1-d.
    DT_RETURN_IF_ERROR(NormalizeDim(start_dim, 1).status());
    DT_RETURN_IF_ERROR(NormalizeDim(end_dim, 1).status());
    return Reshape({1});
  }
  DT_ASSIGN_OR_RETURN(const int64_t start, NormalizeDim(start_dim, dim()));
  DT_ASSIGN_OR_RETURN(const int64_t end, NormalizeDim(end_dim, dim()));
  if (start > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("Flatten: start_dim ", start_dim, " comes after end_dim ",
                     end_dim, " for shape ", ShapeToString(shape_)));
  }
  Shape shape(shape_.begin(), shape_.begin() + start);
  shape.push_back(
      NumElements(absl::MakeConstSpan(shape_).subspan(start, end - start + 1)));
  shape.insert(shape.end(), shape_.begin() + end + 1, shape_.end());
  return Reshape(shape);
}

absl::StatusOr<std::vector<Tensor>> Tensor::Chunk(int64_t chunks,
                                                  int64_t dim) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  DT_RETURN_IF_ERROR(CheckPositive("Chunk", "chunks", chunks));
  // Like torch.chunk, an empty dim still gives `chunks` (empty) pieces.
  if (shape_[d] == 0) return ChunkExact(chunks, d);
  return Split((shape_[d] + chunks - 1) / chunks, d);
}

absl::StatusOr<std::vector<Tensor>> Tensor::ChunkExact(int64_t chunks,
                                                       int64_t dim) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  DT_RETURN_IF_ERROR(CheckPositive("ChunkExact", "chunks", chunks));
  const int64_t size = shape_[d];
  const int64_t chunk_size = (size + chunks - 1) / chunks;
  std::vector<Tensor> pieces;
  pieces.reserve(chunks);
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t start = std::min(i * chunk_size, size);
    const int64_t end = std::min(start + chunk_size, size);
    DT_ASSIGN_OR_RETURN(Tensor piece, Narrow(d, start, end - start));
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

absl::StatusOr<std::vector<Tensor>> Tensor::Split(int64_t split_size,
                                                  int64_t dim) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  const int64_t size = shape_[d];
  if (split_size < 0 || (split_size == 0 && size != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Split: split_size ", split_size,
                     " must be positive for dim ", dim, " of size ", size));
  }
  // One piece, possibly empty, when the dim is empty.
  const int64_t pieces =
      split_size == 0
          ? 1
          : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<int64_t> sizes(pieces, split_size);
  sizes.back() = size - split_size * (pieces - 1);
  return Split(sizes, d);
}

absl::StatusOr<std::vector<Tensor>> Tensor::Split(
    absl::Span<const int64_t> sizes, int64_t dim) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0 || __builtin_add_overflow(total, size, &total)) {
      total = -1;
      break;
    }
  }
  if (total != shape_[d]) {
    return absl::InvalidArgumentError(
        absl::StrCat("Split: sizes ", ShapeToString(sizes),
                     " do not add up to dim ", dim, " of size ", shape_[d]));
  }
  std::vector<Tensor> pieces;
  pieces.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t size : sizes) {
    DT_ASSIGN_OR_RETURN(Tensor piece, Narrow(d, start, size));
    pieces.push_back(std::move(piece));
    start += size;
  }
  return pieces;
}

}  // namespace dtensor
