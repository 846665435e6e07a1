#ifndef DTENSOR_OPS_NORM_OPS_H_
#define DTENSOR_OPS_NORM_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/norm_backward.h"

namespace dtensor {
namespace ops {

// The tensor layer's normalizations over the last dim
// (dtensor/tensor/nn_functional.h: the same semantics and dtypes) on DTensors.
// Errors: what the tensor layer's kernels report; inputs on different meshes.
// None communicates itself:
//   rms_norm, layer_norm   the normalized last dim unsharded (gathered or moved
//                          first), the other dims keep their shards; weight and
//                          bias (over the last dim) Replicate, or
//                          Partial(sum | avg) with x Replicate (the output is
//                          linear in weight, and in weight and bias jointly).
//   rms_norm_backward, layer_norm_backward
//                          (their gradients, one fused local kernel:
//                          dtensor/tensor/norm_backward.h) x and grad sharded
//                          alike on the leading dims (the last dim unsharded)
//                          give dx sharded alike and dweight, dbias
//                          Partial(sum) over those mesh dims (each rank sums
//                          its rows); weight Replicate; grad Partial(sum | avg)
//                          with x and weight Replicate gives Partial outputs
//                          (they are linear in grad).
//
// Registry names and arguments: rms_norm (x, weight?; "eps", scalar, 1e-6);
// layer_norm (x, weight?, bias?; "eps", scalar, 1e-5); rms_norm_backward (x,
// grad, weight?; "eps", scalar, 1e-6) -> (dx, dweight); layer_norm_backward
// (x, grad, weight?; "eps", scalar, 1e-5; "bias", bool, false: whether the
// forward had a bias) -> (dx, dweight, dbias). The registry ops give an absent
// parameter's gradient as an empty [0] tensor.

// `weight` and `bias` are optional (undefined DTensors).
absl::StatusOr<DTensor> RmsNorm(const DTensor& x,
                                const DTensor& weight = DTensor(),
                                double eps = 1e-6);
absl::StatusOr<DTensor> LayerNorm(const DTensor& x,
                                  const DTensor& weight = DTensor(),
                                  const DTensor& bias = DTensor(),
                                  double eps = 1e-5);

// The gradients of rms_norm and layer_norm for the gradient `grad` of their
// output (what their backward runs): dx laid out like x, dweight and dbias
// [last dim of x], each undefined when its parameter is (layer_norm_backward
// reads only the presence of `bias`).
using NormGradients = NormGradsOf<DTensor>;
absl::StatusOr<NormGradients> RmsNormBackward(const DTensor& x,
                                              const DTensor& weight,
                                              const DTensor& grad,
                                              double eps = 1e-6);
absl::StatusOr<NormGradients> LayerNormBackward(const DTensor& x,
                                                const DTensor& weight,
                                                const DTensor& bias,
                                                const DTensor& grad,
                                                double eps = 1e-5);

// rms_norm_backward's own backward (second order): the gradients of its
// inputs (x, grad, weight) for those of its outputs (dx, dweight), read from
// call.inputs[0, 3), call.grad_outputs[0, 2) and the eps first in call.args.
// For fused ops whose gradients extend rms_norm's (add_rms_norm_backward).
absl::StatusOr<std::vector<DTensor>> RmsNormBackwardInputGrads(
    const BackwardCall& call);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> NormOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_NORM_OPS_H_
