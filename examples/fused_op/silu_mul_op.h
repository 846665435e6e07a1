#ifndef DTENSOR_EXAMPLES_FUSED_OP_SILU_MUL_OP_H_
#define DTENSOR_EXAMPLES_FUSED_OP_SILU_MUL_OP_H_

// A user op, written outside dtensor/ops/: silu_mul(gate, up) = silu(gate) *
// up, the fused activation of a SwiGLU feed-forward layer. It shows the four
// pieces of an op (docs/ops.md, "Adding an op"): infer, the sharding rule, the
// kernel, the backward; and its registration, which makes
// `dtensor propagate --op silu_mul` work in any binary this library is linked
// into (//examples/fused_op:dtensor_with_silu_mul).

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace examples {

// The op: two inputs of one shape, any floating dtype. Rule: both inputs
// sharded alike on any dim (the output likewise), or up Partial(sum | avg)
// with gate Replicate (the op is linear in up), with no communication of its
// own; a gate Partial must be completed first (silu is not linear).
const OpDef& SiluMulDef();

// silu(gate) * up on DTensors, recorded by autograd. Errors: shapes that
// differ, non-floating dtypes, the engine's errors.
absl::StatusOr<DTensor> SiluMul(const DTensor& gate, const DTensor& up);

}  // namespace examples
}  // namespace dtensor

#endif  // DTENSOR_EXAMPLES_FUSED_OP_SILU_MUL_OP_H_
