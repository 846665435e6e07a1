#include "dtensor/nn/autograd_accumulate.h"

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace nn {

absl::Status AccumulateGradients(std::vector<DTensor>* accumulated,
                                 absl::Span<const DTensor> grads) {
  if (accumulated->empty()) accumulated->resize(grads.size());
  if (accumulated->size() != grads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AccumulateGradients: ", grads.size(), " gradients for ",
                     accumulated->size(), " accumulators"));
  }
  NoGrad not_recorded;
  for (size_t i = 0; i < grads.size(); ++i) {
    const DTensor& grad = grads[i];
    DTensor& sum = (*accumulated)[i];
    if (!grad.defined()) continue;
    if (!sum.defined()) {
      sum = grad;
      continue;
    }
    if (sum.shape() != grad.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("AccumulateGradients: gradient ", i, " has shape ",
                       ShapeToString(grad.shape()), ", its accumulator ",
                       ShapeToString(sum.shape())));
    }
    DT_ASSIGN_OR_RETURN(sum, ops::Add(sum, grad));
  }
  return absl::OkStatus();
}

void ZeroGradients(std::vector<DTensor>* accumulated) {
  for (DTensor& sum : *accumulated) sum = DTensor();
}

}  // namespace nn
}  // namespace dtensor
