#include "dtensor/tensor/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/tensor_internal.h"

// Shape helpers and Tensor's metadata and element access. The factories, the
// views and the copies live in tensor_factories.cc, tensor_views.cc and
// tensor_copies.cc.
namespace dtensor {
namespace internal {

absl::Status CheckDefined(const Tensor& tensor, absl::string_view op) {
  if (tensor.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": undefined tensor"));
}

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

}  // namespace internal

using internal::CheckDefined;

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
  if (!device().is_cpu()) {
    // The deferred index checks' contract (index_checks.h): At's copy waited
    // for the device's stream, so they cost no further wait -- unless it
    // failed, which At reports as NaN.
    DT_RETURN_IF_ERROR(std::isnan(value)
                           ? ReadDeferredIndexChecks()
                           : ReadDeferredIndexChecksAfterWait(device()));
  }
  if (std::isnan(value) && !device().is_cpu()) {
    // At reports a failed device copy as NaN; tell it apart from a NaN value.
    DT_ASSIGN_OR_RETURN(Tensor host, To(Device::CPU()));
    return host.Item();
  }
  return value;
}

}  // namespace dtensor
