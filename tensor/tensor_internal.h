#ifndef DTENSOR_TENSOR_TENSOR_INTERNAL_H_
#define DTENSOR_TENSOR_TENSOR_INTERNAL_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/tensor/tensor.h"

// Checks and copies shared by the files that implement Tensor (tensor.cc,
// tensor_factories.cc, tensor_views.cc, tensor_copies.cc); not for users.
namespace dtensor::internal {

// OK when `tensor` is defined, else InvalidArgument naming `op`.
absl::Status CheckDefined(const Tensor& tensor, absl::string_view op);

// The element count of `shape`, or an error when a size is negative or the
// count overflows int64.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape,
                                           absl::string_view op);

// The offset of the last element of a non-empty strided view, relative to
// its first element, or nullopt on overflow.
std::optional<int64_t> LastElementOffset(absl::Span<const int64_t> shape,
                                         absl::Span<const int64_t> strides);

// A contiguous copy of `tensor` on its own device.
absl::StatusOr<Tensor> ContiguousCopy(const Tensor& tensor);

}  // namespace dtensor::internal

#endif  // DTENSOR_TENSOR_TENSOR_INTERNAL_H_
