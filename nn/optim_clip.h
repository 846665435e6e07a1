#ifndef DTENSOR_NN_OPTIM_CLIP_H_
#define DTENSOR_NN_OPTIM_CLIP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"

namespace dtensor {
namespace nn {

// The 2-norm of all elements of all `grads` together (undefined entries
// skipped), each global element counted once whatever the shardings: the sums
// of squares are ops::SumOfSquares reductions (one fused pass over each
// shard, f64), so sharded dims add their shards' sums and replicated dims
// count once. Gradients on one mesh share one
// all-reduce (their Partial sums add up locally first). Every rank calls it
// (SPMD) and gets the same value. Under a metadata-only runtime the
// collectives are recorded and the norm is 0. Not recorded by a tape.
// Errors: a non-floating gradient (naming its index), the ops' errors.
absl::StatusOr<double> GlobalGradNorm(absl::Span<const DTensor> grads);

// Clips gradients by their global norm, like torch.nn.utils.clip_grad_norm_:
// when GlobalGradNorm exceeds `max_norm`, every gradient is scaled by
// max_norm / (norm + 1e-6) (shardings kept). Returns the norm before
// clipping. Errors: a negative max_norm, GlobalGradNorm's errors.
absl::StatusOr<double> ClipGradNorm(std::vector<DTensor>* grads,
                                    double max_norm);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_OPTIM_CLIP_H_
