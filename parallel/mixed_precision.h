#ifndef DTENSOR_PARALLEL_MIXED_PRECISION_H_
#define DTENSOR_PARALLEL_MIXED_PRECISION_H_

#include "absl/status/status.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/mixed_precision_policy.h"

namespace dtensor {
namespace parallel {

// Installs `policy` (dtensor/parallel/mixed_precision_policy.h) on the
// initialized tree `root`, after any FSDP hooks (dtensor/parallel/fsdp.h,
// whose gathers cast to param_dtype themselves):
// - every module that owns parameters gets an input hook that casts each of
//   its floating parameter slots not already in param_dtype (ops::To,
//   recorded, so the gradient flows back to the master in its dtype) and a
//   floating input to param_dtype, and an exit hook that puts the masters
//   back, so the cast copies live only while the module runs (and where the
//   tape keeps them for backward);
// - the root gets an output hook that casts its output to output_dtype.
// The masters in the slots are never replaced outside a call: parameters
// taken from the slots (optimizers, checkpoints) stay the masters.
// reduce_dtype is the gradient reduction's (GradientBuckets).
// Errors: CheckMixedPrecisionPolicy's.
absl::Status AddMixedPrecisionHooks(nn::Module& root,
                                    const MixedPrecisionPolicy& policy);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_MIXED_PRECISION_H_
