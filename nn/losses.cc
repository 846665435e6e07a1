#include "dtensor/nn/losses.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/vocab_ops.h"

namespace dtensor {
namespace nn {
namespace {

absl::Status CheckSameShape(absl::string_view loss, const DTensor& prediction,
                            const DTensor& target) {
  if (prediction.shape() == target.shape()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      loss, ": prediction has shape ", ShapeToString(prediction.shape()),
      " but target has shape ", ShapeToString(target.shape())));
}

// The elementwise losses `elementwise` reduced as `reduction` asks.
absl::StatusOr<DTensor> Reduce(const DTensor& elementwise,
                               Reduction reduction) {
  switch (reduction) {
    case Reduction::kNone:
      return elementwise;
    case Reduction::kMean:
      return ops::Mean(elementwise);
    case Reduction::kSum:
      return ops::Sum(elementwise);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "loss: reduction ", static_cast<int>(reduction), " is not none, mean "
      "or sum"));
}

}  // namespace

absl::StatusOr<DTensor> MSELoss::operator()(const DTensor& prediction,
                                            const DTensor& target) const {
  DT_RETURN_IF_ERROR(CheckSameShape(name(), prediction, target));
  DT_ASSIGN_OR_RETURN(const DTensor difference, ops::Sub(prediction, target));
  DT_ASSIGN_OR_RETURN(const DTensor squares, ops::Mul(difference, difference));
  return Reduce(squares, reduction_);
}

absl::StatusOr<DTensor> L1Loss::operator()(const DTensor& prediction,
                                           const DTensor& target) const {
  DT_RETURN_IF_ERROR(CheckSameShape(name(), prediction, target));
  DT_ASSIGN_OR_RETURN(const DTensor difference, ops::Sub(prediction, target));
  DT_ASSIGN_OR_RETURN(const DTensor magnitudes, ops::Abs(difference));
  return Reduce(magnitudes, reduction_);
}

absl::StatusOr<DTensor> CrossEntropyLoss::operator()(
    const DTensor& logits, const DTensor& target) const {
  return ops::CrossEntropy(logits, target, reduction_, ignore_index_);
}

}  // namespace nn
}  // namespace dtensor
