#ifndef DTENSOR_NN_GRAD_CHECK_H_
#define DTENSOR_NN_GRAD_CHECK_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"

namespace dtensor {
namespace nn {

// A function of DTensors to check, written with ops.
using DifferentiableFn =
    std::function<absl::StatusOr<DTensor>(absl::Span<const DTensor> inputs)>;

struct GradCheckOptions {
  // The central-difference step.
  double step = 1e-6;
  // |tape - numeric| <= atol + rtol * |numeric| for every element.
  double rtol = 1e-5;
  double atol = 1e-7;
  // Seeds the random output gradient.
  uint32_t seed = 0;
};

// Checks GradientTape's gradients of `fn` at `inputs` against central finite
// differences, like torch.autograd.gradcheck: with a fixed random output
// gradient c (uniform in [-1, 1)), the tape's gradient of every floating
// input must match (f(x + step e) - f(x - step e)) . c / (2 step) for every
// element e. Use f64 inputs. Inputs that are undefined or not floating are
// passed through unchecked. Costs two evaluations of `fn` per element.
// Requires: every rank of the mesh calls it.
// Errors: a floating input not Replicate on every mesh dim (each rank holds
// it whole; a one-rank mesh does), naming it; `fn`'s or the
// tape's errors, and the first element that differs (naming the input, the
// element and both values).
absl::Status CheckGradients(const DifferentiableFn& fn,
                            absl::Span<const DTensor> inputs,
                            const GradCheckOptions& options = {});

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_GRAD_CHECK_H_
