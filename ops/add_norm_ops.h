#ifndef DTENSOR_OPS_ADD_NORM_OPS_H_
#define DTENSOR_OPS_ADD_NORM_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/norm_ops.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// The residual add of a pre-norm block fused with the RMSNorm after it
// (dtensor/tensor/fused_norm.h) on DTensors: one local kernel that reads the
// residual stream once and writes both the next residual and the normalized
// rows. None communicates itself:
//   add_rms_norm           residual and delta sharded alike on the leading
//                          dims (the normalized last dim unsharded) give sum
//                          and normed sharded alike; weight Replicate, or
//                          Partial(sum | avg) with residual and delta
//                          Replicate (sum Replicate, normed Partial: it is
//                          linear in weight, as rms_norm's rule). Partial
//                          residual or delta are reduced first (the norm is
//                          not linear in its input).
//   add_rms_norm_backward  rms_norm_backward's strategies (x, grad and
//                          grad_sum sharded alike on the leading dims, dweight
//                          then Partial(sum); or grad and grad_sum
//                          Partial(sum | avg) with x and weight Replicate,
//                          every output Partial).
//
// Registry names and arguments: add_rms_norm (residual, delta, weight?;
// "eps", scalar, 1e-6) -> (sum, normed); add_rms_norm_backward (x, grad,
// weight?, grad_sum?; "eps", scalar, 1e-6) -> (dx, dweight), x the forward's
// sum, grad normed's gradient, grad_sum sum's; dx is the gradient of both
// residual and delta; an absent weight's gradient is an empty [0] tensor.

// sum = residual + delta and normed = rms_norm(sum, weight, eps); `weight`
// may be undefined. Its gradient (through autograd) is the fused
// add_rms_norm_backward.
// Errors: what the tensor layer reports; inputs on different meshes.
struct AddNormOutputs {
  DTensor sum;
  DTensor normed;
};
absl::StatusOr<AddNormOutputs> AddRmsNorm(const DTensor& residual,
                                          const DTensor& delta,
                                          const DTensor& weight = DTensor(),
                                          double eps = 1e-6);

// The gradients of add_rms_norm from its `sum` and its outputs' gradients
// (`grad_sum` may be undefined): dx (the residual's and the delta's
// gradient) and dweight (undefined without a weight); dbias is undefined.
absl::StatusOr<NormGradients> AddRmsNormBackward(const DTensor& sum,
                                                 const DTensor& weight,
                                                 const DTensor& grad_normed,
                                                 const DTensor& grad_sum,
                                                 double eps = 1e-6);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> AddNormOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_ADD_NORM_OPS_H_
