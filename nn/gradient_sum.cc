#include "dtensor/nn/gradient_sum.h"

#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace nn {

absl::Status AddGradient(DTensor& sum, DTensor grad) {
  if (!sum.defined()) {
    sum = std::move(grad);
    return absl::OkStatus();
  }
  if (ops::CanAddCompleteToPartial(sum, grad)) {
    DT_ASSIGN_OR_RETURN(sum, ops::AddCompleteToPartial(sum, grad));
  } else if (ops::CanAddCompleteToPartial(grad, sum)) {
    DT_ASSIGN_OR_RETURN(sum, ops::AddCompleteToPartial(grad, sum));
  } else {
    DT_ASSIGN_OR_RETURN(sum, ops::Add(sum, grad));
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
