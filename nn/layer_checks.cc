#include "dtensor/nn/layer_checks.h"

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

absl::Status CheckPositive(absl::string_view layer, absl::string_view name,
                           int64_t value) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(layer, ": ", name, " ", value, " must be positive"));
}

absl::Status CheckInput(absl::string_view layer, const DTensor& x, int64_t rank,
                        int64_t last) {
  if (!x.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": the input is undefined"));
  }
  const Shape& shape = x.shape();
  if (static_cast<int64_t>(shape.size()) == rank && shape.back() == last) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(layer, ": input of shape ", ShapeToString(shape),
                   " must have ", rank, " dims, the last of size ", last));
}

}  // namespace nn
}  // namespace dtensor
