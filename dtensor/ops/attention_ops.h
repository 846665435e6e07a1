#ifndef DTENSOR_OPS_ATTENTION_OPS_H_
#define DTENSOR_OPS_ATTENTION_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// The tensor layer's ScaledDotProductAttention
// (dtensor/tensor/nn_functional.h: the same semantics and dtypes) on DTensors.
// Errors: what the tensor layer reports; inputs on different meshes. It does
// not communicate itself; a dim the rule needs whole is gathered by the engine
// first:
//   scaled_dot_product_attention
//                          q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev]:
//                          the leading (batch, head) dims sharded alike in all
//                          three (Replicate where broadcast); Lq sharded in q
//                          and the output with k and v Replicate (causal
//                          included: each rank masks by its queries' global
//                          positions); Ev sharded in v and the output; v
//                          Partial(sum | avg) with q, k Replicate. E and Lk
//                          are never sharded.
//
// Registry name and arguments: scaled_dot_product_attention (q, k, v;
// "causal", bool, false; "scale", scalar, 0 = 1/sqrt(E)).

absl::StatusOr<DTensor> ScaledDotProductAttention(const DTensor& q,
                                                  const DTensor& k,
                                                  const DTensor& v,
                                                  bool causal = false,
                                                  double scale = 0.0);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> AttentionOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_ATTENTION_OPS_H_
