#ifndef DTENSOR_NN_GRADIENT_SUM_H_
#define DTENSOR_NN_GRADIENT_SUM_H_

#include "absl/status/status.h"
#include "dtensor/dtensor.h"

namespace dtensor {
namespace nn {

// Adds `grad` to the gradient accumulated in `sum` (undefined: none yet), a
// gradient of the same tensor (shape and dtype), the way a backward pass sums
// the contributions of a tensor's uses. A complete gradient meeting a partial
// one (a residual's gradient and a row-parallel layer's input gradient) is
// added without zeros or communication (ops::AddCompleteToPartial). Errors:
// the addition's.
absl::Status AddGradient(DTensor& sum, DTensor grad);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_GRADIENT_SUM_H_
