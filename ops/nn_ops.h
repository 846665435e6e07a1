#ifndef DTENSOR_OPS_NN_OPS_H_
#define DTENSOR_OPS_NN_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// The tensor layer's neural-network kernels (dtensor/tensor/nn_functional.h:
// the same semantics and dtypes) on DTensors. Errors: what the tensor layer's
// kernels report; inputs on different meshes. None communicates itself; a dim a
// rule needs whole is gathered (or moved to another dim) by the engine first:
//   softmax, log_softmax   `dim` unsharded; every other dim keeps its shards.
//   rotary_embedding       x [..., seq, heads, head_dim]: every dim but
//                          head_dim may stay sharded; with seq sharded and no
//                          positions given, each rank rotates by the GLOBAL
//                          positions of its rows (its block offset); given
//                          positions [seq] are sharded like seq. x
//                          Partial(sum | avg) passes through.
//
// Registry names and arguments: softmax, log_softmax ("dim", int);
// rotary_embedding (x, positions?; "theta", scalar, 10000). The norms are
// dtensor/ops/norm_ops.h's, attention is dtensor/ops/attention_ops.h's.

absl::StatusOr<DTensor> Softmax(const DTensor& x, int64_t dim);
absl::StatusOr<DTensor> LogSoftmax(const DTensor& x, int64_t dim);
// `positions` is optional (undefined: 0..seq-1 over the global sequence,
// whose angle tables stay cached on the device); `inverse` rotates by minus
// the angles (the embedding's gradient).
absl::StatusOr<DTensor> RotaryEmbedding(const DTensor& x,
                                        const DTensor& positions = DTensor(),
                                        double theta = 10000.0,
                                        bool inverse = false);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> NnOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_NN_OPS_H_
