#include "tensor/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/convert.h"
#include "tensor/cuda_backend.h"
#include "tensor/cuda_backend_ops.h"
#include "tensor/dispatch.h"
#include "tensor/strided_loop.h"

namespace dtensor {
namespace {

absl::Status CheckDefined(const Tensor& tensor, absl::string_view op) {
  if (tensor.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": undefined tensor"));
}

// The element count of `shape`, or an error when a size is negative or the
// count overflows int64.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape,
                                           absl::string_view op) {
  int64_t numel = 1;
  for (int64_t size : shape) {
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": negative size ", size, " in shape ", ShapeToString(shape)));
    }
  }
  for (int64_t size : shape) {
    if (__builtin_mul_overflow(numel, size, &numel)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": shape ", ShapeToString(shape), " has too many elements"));
    }
  }
  return numel;
}

// The offset of the last element of a non-empty strided view, relative to
// its first element, or nullopt on overflow.
std::optional<int64_t> LastElementOffset(absl::Span<const int64_t> shape,
                                         absl::Span<const int64_t> strides) {
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t extent;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &extent) ||
        __builtin_add_overflow(last, extent, &last)) {
      return std::nullopt;
    }
  }
  return last;
}

// `dst[i] = src[i]` for every index, converting dtypes. Both on the CPU, of
// the same shape, not overlapping.
void CopyElements(const Tensor& dst, const Tensor& src) {
  DispatchDType(dst.dtype(), [&](auto dst_tag) {
    using D = decltype(dst_tag);
    DispatchDType(src.dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      D* const dst_base = dst.data<D>();
      const S* const src_base = src.data<S>();
      ForEachStridedRun<2>(dst.shape(), {dst.strides(), src.strides()}, {0, 0},
                           [&](const OperandOffsets<2>& offsets,
                               const OperandOffsets<2>& steps, int64_t count) {
                             D* out = dst_base + offsets[0];
                             const S* in = src_base + offsets[1];
                             if (steps[0] == 1 && steps[1] == 1) {
                               if constexpr (std::is_same_v<D, S>) {
                                 std::memcpy(out, in, count * sizeof(D));
                               } else {
                                 for (int64_t j = 0; j < count; ++j) {
                                   out[j] = ConvertValue<D>(in[j]);
                                 }
                               }
                             } else {
                               for (int64_t j = 0; j < count; ++j) {
                                 out[j * steps[0]] =
                                     ConvertValue<D>(in[j * steps[1]]);
                               }
                             }
                           });
    });
  });
}

// A contiguous copy of `tensor` on its own device.
absl::StatusOr<Tensor> ContiguousCopy(const Tensor& tensor) {
  DT_RETURN_IF_ERROR(CheckDefined(tensor, "Clone"));
  DT_ASSIGN_OR_RETURN(Tensor copy, Tensor::Empty(tensor.shape(), tensor.dtype(),
                                                 tensor.device()));
  DT_RETURN_IF_ERROR(copy.CopyFrom(tensor));
  return copy;
}

// `tensor` itself when contiguous, else a contiguous copy.
absl::StatusOr<Tensor> ContiguousOrCopy(const Tensor& tensor) {
  if (tensor.is_contiguous()) return tensor;
  return ContiguousCopy(tensor);
}

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

}  // namespace

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  return numel;
}

Strides ContiguousStrides(absl::Span<const int64_t> shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t ndim) {
  if (dim < -ndim || dim >= ndim) {
    if (ndim == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim ", dim, " is out of range for a 0-d tensor"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", dim, " is out of range for a tensor of rank ",
                     ndim, " (expected [", -ndim, ", ", ndim - 1, "])"));
  }
  return dim < 0 ? dim + ndim : dim;
}

// ---- Creation. ----

absl::StatusOr<Tensor> Tensor::Empty(Shape shape, DType dtype, Device device) {
  DT_ASSIGN_OR_RETURN(const int64_t numel, CheckedNumElements(shape, "Empty"));
  int64_t nbytes;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(ElementSize(dtype)),
                             &nbytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Empty: shape ", ShapeToString(shape), " has too many bytes"));
  }
  DT_ASSIGN_OR_RETURN(auto storage, Storage::Allocate(nbytes, device));
  Tensor tensor;
  tensor.storage_ = std::move(storage);
  tensor.dtype_ = dtype;
  tensor.strides_ = ContiguousStrides(shape);
  tensor.shape_ = std::move(shape);
  return tensor;
}

absl::StatusOr<Tensor> Tensor::Zeros(Shape shape, DType dtype, Device device) {
  return Full(std::move(shape), 0.0, dtype, device);
}

absl::StatusOr<Tensor> Tensor::Ones(Shape shape, DType dtype, Device device) {
  return Full(std::move(shape), 1.0, dtype, device);
}

absl::StatusOr<Tensor> Tensor::Full(Shape shape, double value, DType dtype,
                                    Device device) {
  // Other devices get the values through a host copy.
  DT_ASSIGN_OR_RETURN(Tensor host, Empty(std::move(shape), dtype));
  DT_RETURN_IF_ERROR(host.Fill(value));
  return host.To(device);
}

absl::StatusOr<Tensor> Tensor::Arange(double start, double end, double step,
                                      DType dtype) {
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step) ||
      step == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Arange: start ", start, ", end ", end, " and step ", step,
                     " must be finite, with a non-zero step"));
  }
  const double steps = std::ceil((end - start) / step);
  if (steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Arange: step ", step,
                                                   " goes away from end ", end,
                                                   " starting at ", start));
  }
  if (steps >= 9.0e18) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Arange: [", start, ", ", end, ") by ", step, " is too long"));
  }
  DT_ASSIGN_OR_RETURN(Tensor tensor,
                      Empty({static_cast<int64_t>(steps)}, dtype));
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = tensor.data<T>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      data[i] = ConvertValue<T>(start + static_cast<double>(i) * step);
    }
  });
  return tensor;
}

absl::StatusOr<Tensor> Tensor::Uniform(Shape shape, double low, double high,
                                       Generator& generator, DType dtype) {
  if (!IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Uniform: dtype ", std::string(DTypeName(dtype)),
                     " is not floating point"));
  }
  if (!std::isfinite(low) || !std::isfinite(high) || low > high) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Uniform: [", low, ", ", high, ") is not a finite interval"));
  }
  DT_ASSIGN_OR_RETURN(Tensor tensor, Empty(std::move(shape), dtype));
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = tensor.data<T>();
    // f64 gets 53 random bits per element, the narrower floats 24. Rounding
    // to a narrow dtype can give `high` itself when high - low is large
    // relative to the dtype's spacing near `high` (as in torch).
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      const double unit = std::is_same_v<T, double>
                              ? generator.NextUniformDouble()
                              : generator.NextUniformFloat();
      data[i] = ConvertValue<T>(low + (high - low) * unit);
    }
  });
  return tensor;
}

absl::StatusOr<Tensor> Tensor::Normal(Shape shape, double mean, double stddev,
                                      Generator& generator, DType dtype) {
  if (!IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Normal: dtype ", std::string(DTypeName(dtype)),
                     " is not floating point"));
  }
  if (!std::isfinite(mean) || !std::isfinite(stddev) || stddev < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Normal: mean ", mean, " and stddev ", stddev,
                     " must be finite, with stddev >= 0"));
  }
  DT_ASSIGN_OR_RETURN(Tensor tensor, Empty(std::move(shape), dtype));
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = tensor.data<T>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      data[i] = ConvertValue<T>(mean + stddev * generator.NextNormal());
    }
  });
  return tensor;
}

Tensor Tensor::Scalar(double value, DType dtype) {
  auto tensor = Full({}, value, dtype);
  return tensor.ok() ? *std::move(tensor) : Tensor();
}

absl::StatusOr<Tensor> Tensor::FromStorage(std::shared_ptr<Storage> storage,
                                           DType dtype, Shape shape,
                                           Strides strides,
                                           int64_t storage_offset) {
  if (storage == nullptr) {
    return absl::InvalidArgumentError("FromStorage: null storage");
  }
  if (shape.size() != strides.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromStorage: shape ", ShapeToString(shape), " and strides ",
        ShapeToString(strides), " differ in rank"));
  }
  DT_ASSIGN_OR_RETURN(const int64_t numel,
                      CheckedNumElements(shape, "FromStorage"));
  for (int64_t stride : strides) {
    if (stride < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FromStorage: negative stride in ", ShapeToString(strides)));
    }
  }
  if (storage_offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromStorage: negative storage offset ", storage_offset));
  }
  if (numel > 0) {
    // The view reads elements [offset, offset + last] of the storage.
    const std::optional<int64_t> last = LastElementOffset(shape, strides);
    const int64_t capacity = storage->nbytes() / ElementSize(dtype);
    if (!last.has_value() || storage_offset >= capacity ||
        *last >= capacity - storage_offset) {
      return absl::OutOfRangeError(
          absl::StrCat("FromStorage: shape ", ShapeToString(shape),
                       " with strides ", ShapeToString(strides), " at offset ",
                       storage_offset, " reads past the storage's ", capacity,
                       " ", std::string(DTypeName(dtype)), " elements"));
    }
  }
  Tensor tensor;
  tensor.storage_ = std::move(storage);
  tensor.dtype_ = dtype;
  tensor.shape_ = std::move(shape);
  tensor.strides_ = std::move(strides);
  tensor.storage_offset_ = storage_offset;
  return tensor;
}

// ---- Metadata and data access. ----

Device Tensor::device() const {
  return defined() ? storage_->device() : Device::CPU();
}

int64_t Tensor::size(int64_t dim) const {
  auto normalized = NormalizeDim(dim, this->dim());
  return normalized.ok() ? shape_[*normalized] : -1;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

void* Tensor::raw_data() const {
  if (!defined()) return nullptr;
  return static_cast<char*>(storage_->data()) +
         storage_offset_ * static_cast<int64_t>(ElementSize(dtype_));
}

double Tensor::At(absl::Span<const int64_t> index) const {
  constexpr double kInvalid = std::numeric_limits<double>::quiet_NaN();
  if (!defined() || static_cast<int64_t>(index.size()) != dim()) {
    return kInvalid;
  }
  int64_t offset = 0;
  for (int64_t d = 0; d < dim(); ++d) {
    if (index[d] < 0 || index[d] >= shape_[d]) return kInvalid;
    offset += index[d] * strides_[d];
  }
  const size_t element_size = ElementSize(dtype_);
  const char* element = static_cast<const char*>(raw_data()) +
                        offset * static_cast<int64_t>(element_size);
  alignas(8) char bytes[8];
  if (device().is_cpu()) {
    std::memcpy(bytes, element, element_size);
  } else if (!cuda::Memcpy(bytes, element, element_size,
                           cuda::CopyKind::kDeviceToHost, device().index)
                  .ok()) {
    return kInvalid;
  }
  return DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return ConvertValue<double>(value);
  });
}

absl::StatusOr<double> Tensor::Item() const {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "Item"));
  if (numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Item needs a 1-element tensor, got shape ",
                     ShapeToString(shape_), " (", numel(), " elements)"));
  }
  const double value = At(Shape(dim(), 0));
  if (std::isnan(value) && !device().is_cpu()) {
    // At reports a failed device copy as NaN; tell it apart from a NaN value.
    DT_ASSIGN_OR_RETURN(Tensor host, To(Device::CPU()));
    return host.Item();
  }
  return value;
}

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
  if (step <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slice: step ", step, " must be positive"));
  }
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
  if (chunks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Chunk: chunks ", chunks, " must be positive"));
  }
  // Like torch.chunk, an empty dim still gives `chunks` (empty) pieces.
  if (shape_[d] == 0) return ChunkExact(chunks, d);
  return Split((shape_[d] + chunks - 1) / chunks, d);
}

absl::StatusOr<std::vector<Tensor>> Tensor::ChunkExact(int64_t chunks,
                                                       int64_t dim) const {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, this->dim()));
  if (chunks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChunkExact: chunks ", chunks, " must be positive"));
  }
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

// ---- Copies. ----

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  return Clone();
}

Tensor Tensor::Clone() const {
  auto copy = ContiguousCopy(*this);
  return copy.ok() ? *std::move(copy) : Tensor();
}

absl::Status Tensor::CopyFrom(const Tensor& src) {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "CopyFrom"));
  DT_RETURN_IF_ERROR(CheckDefined(src, "CopyFrom (source)"));
  auto expanded = src.Expand(shape_);
  if (!expanded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyFrom: cannot broadcast source shape ", ShapeToString(src.shape()),
        " to ", ShapeToString(shape_)));
  }
  if (device().is_cuda() && src.device() == device()) {
    return cuda::CopyOnDevice(*expanded, *this);
  }
  if (!device().is_cpu()) {
    // Stage the converted values on the host, then copy them over.
    if (!is_contiguous()) {
      return absl::FailedPreconditionError(
          absl::StrCat("CopyFrom into a non-contiguous tensor on ",
                       device().ToString(), " is not supported"));
    }
    DT_ASSIGN_OR_RETURN(Tensor staged, Empty(shape_, dtype_));
    DT_RETURN_IF_ERROR(staged.CopyFrom(*expanded));
    if (nbytes() == 0) return absl::OkStatus();
    return cuda::Memcpy(raw_data(), staged.raw_data(), nbytes(),
                        cuda::CopyKind::kHostToDevice, device().index);
  }
  if (!src.device().is_cpu()) {
    DT_ASSIGN_OR_RETURN(expanded, expanded->To(Device::CPU()));
  } else if (src.storage() == storage_) {
    // The source may overlap the destination: read from a snapshot.
    DT_ASSIGN_OR_RETURN(expanded, ContiguousCopy(*expanded));
  }
  CopyElements(*this, *expanded);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Tensor::To(DType dtype) const {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "To"));
  if (dtype == dtype_) return *this;
  DT_ASSIGN_OR_RETURN(Tensor converted, Empty(shape_, dtype, device()));
  DT_RETURN_IF_ERROR(converted.CopyFrom(*this));
  return converted;
}

absl::StatusOr<Tensor> Tensor::To(Device device) const {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "To"));
  if (device == this->device()) return *this;
  if (!device.is_cpu() && !this->device().is_cpu()) {
    // Between CUDA devices through the host.
    DT_ASSIGN_OR_RETURN(Tensor host, To(Device::CPU()));
    return host.To(device);
  }
  if (!device.is_cpu()) {
    DT_ASSIGN_OR_RETURN(Tensor source, ContiguousOrCopy(*this));
    DT_ASSIGN_OR_RETURN(Tensor copy, Empty(shape_, dtype_, device));
    if (nbytes() == 0) return copy;
    DT_RETURN_IF_ERROR(cuda::Memcpy(copy.raw_data(), source.raw_data(),
                                    nbytes(), cuda::CopyKind::kHostToDevice,
                                    device.index));
    return copy;
  }
  // To the host: copy the span of storage the view covers, then re-apply the
  // view there.
  if (numel() == 0) return Empty(shape_, dtype_);
  const int64_t span = *LastElementOffset(shape_, strides_) + 1;
  DT_ASSIGN_OR_RETURN(auto host,
                      Storage::Allocate(span * ElementSize(dtype_), device));
  DT_RETURN_IF_ERROR(cuda::Memcpy(host->data(), raw_data(), host->nbytes(),
                                  cuda::CopyKind::kDeviceToHost,
                                  this->device().index));
  Tensor view = MakeView(shape_, strides_, 0);
  view.storage_ = std::move(host);
  return ContiguousOrCopy(view);
}

// ---- In place. ----

absl::Status Tensor::Fill(double value) {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "Fill"));
  if (!device().is_cpu()) {
    DT_ASSIGN_OR_RETURN(Tensor host, Full(shape_, value, dtype_));
    return CopyFrom(host);
  }
  DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T fill = ConvertValue<T>(value);
    T* const base = data<T>();
    ForEachStridedRun<1>(shape_, {strides_}, {0},
                         [&](const OperandOffsets<1>& offsets,
                             const OperandOffsets<1>& steps, int64_t count) {
                           T* out = base + offsets[0];
                           for (int64_t j = 0; j < count; ++j) {
                             out[j * steps[0]] = fill;
                           }
                         });
  });
  return absl::OkStatus();
}

}  // namespace dtensor
