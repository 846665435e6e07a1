#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/tensor/tensor_internal.h"

// Tensor's factories: new storage (Empty, Full, Arange, random) and views of
// given storage (FromStorage).
namespace dtensor {

using internal::CheckedNumElements;
using internal::LastElementOffset;

namespace {

// OK for a floating dtype, else InvalidArgument naming `op` and the dtype.
absl::Status CheckFloatingDType(DType dtype, absl::string_view op) {
  if (IsFloatingPoint(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": dtype ", std::string(DTypeName(dtype)), " is not floating point"));
}

}  // namespace

// ---- Creation. ----

absl::StatusOr<Tensor> Tensor::Empty(Shape shape, DType dtype, Device device) {
  DT_ASSIGN_OR_RETURN(const int64_t numel, CheckedNumElements(shape, "Empty"));
  int64_t nbytes;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(ElementSize(dtype)),
                             &nbytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Empty: shape ", ShapeToString(shape), " has too many bytes"));
  }
  absl::StatusOr<std::shared_ptr<Storage>> storage =
      Storage::Allocate(nbytes, device);
  if (!storage.ok()) {  // Named: which tensor of the step did not fit.
    return absl::Status(storage.status().code(),
                        absl::StrCat("Empty: a ", std::string(DTypeName(dtype)),
                                     ShapeToString(shape),
                                     " tensor: ", storage.status().message()));
  }
  Tensor tensor;
  tensor.storage_ = *std::move(storage);
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
  DT_ASSIGN_OR_RETURN(Tensor tensor, Empty(std::move(shape), dtype, device));
  DT_RETURN_IF_ERROR(tensor.Fill(value));
  return tensor;
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
  DT_RETURN_IF_ERROR(CheckFloatingDType(dtype, "Uniform"));
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
  DT_RETURN_IF_ERROR(CheckFloatingDType(dtype, "Normal"));
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

}  // namespace dtensor
