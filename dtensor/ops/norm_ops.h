#ifndef DTENSOR_OPS_NORM_OPS_H_
#define DTENSOR_OPS_NORM_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

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
//
// Registry names and arguments: rms_norm (x, weight?; "eps", scalar, 1e-6);
// layer_norm (x, weight?, bias?; "eps", scalar, 1e-5).

// `weight` and `bias` are optional (undefined DTensors).
absl::StatusOr<DTensor> RmsNorm(const DTensor& x,
                                const DTensor& weight = DTensor(),
                                double eps = 1e-6);
absl::StatusOr<DTensor> LayerNorm(const DTensor& x,
                                  const DTensor& weight = DTensor(),
                                  const DTensor& bias = DTensor(),
                                  double eps = 1e-5);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> NormOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_NORM_OPS_H_
