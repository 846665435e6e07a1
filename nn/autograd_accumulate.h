#ifndef DTENSOR_NN_AUTOGRAD_ACCUMULATE_H_
#define DTENSOR_NN_AUTOGRAD_ACCUMULATE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"

namespace dtensor {
namespace nn {

// Gradient accumulation over several steps (micro-batches):
//
//   std::vector<DTensor> accumulated;
//   for (...) {
//     ... tape.Gradient(loss, params, options) ...
//     DT_RETURN_IF_ERROR(AccumulateGradients(&accumulated, grads));
//   }
//   optimizer.Step(accumulated);
//   ZeroGradients(&accumulated);
//
// Adds `grads` into `accumulated`, entry by entry, with ops::Add (not
// recorded by a tape): an undefined accumulator takes the gradient as is, an
// undefined gradient leaves its accumulator. The sums keep the shardings
// propagation gives them, so gradients taken with keep_propagated_shardings
// stay Partial and are reduced once, when the optimizer redistributes them.
// An empty `accumulated` is first sized to `grads`. Errors: a count or shape
// mismatch (naming the index), the additions' errors.
absl::Status AccumulateGradients(std::vector<DTensor>* accumulated,
                                 absl::Span<const DTensor> grads);

// Resets every accumulator to "no gradient" (undefined), keeping the count.
void ZeroGradients(std::vector<DTensor>* accumulated);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_AUTOGRAD_ACCUMULATE_H_
