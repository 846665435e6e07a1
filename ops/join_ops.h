#ifndef DTENSOR_OPS_JOIN_OPS_H_
#define DTENSOR_OPS_JOIN_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Joining DTensors, with the tensor layer's semantics (Cat, Stack in
// dtensor/tensor/tensor.h).
// Errors: what Cat and Stack report; tensors on different meshes.
//   cat     the joined dim is never sharded (pieces of the chunk rule do not
//           concatenate into pieces of it), so a sharded one is gathered (or
//           moved to another dim) first; every other dim keeps its shards,
//           sharded alike in all inputs.
//   stack   every dim keeps its shards, alike in all inputs; the new dim is
//           not sharded.
// Partial(any op) passes through when every input has it.
//
// Registry names: cat, stack: up to kMaxJoinInputs tensors (absent ones are
// skipped) and the argument "dim" (int). Cat and Stack take any number of
// tensors, joining longer lists in several calls.
inline constexpr int kMaxJoinInputs = 16;

absl::StatusOr<DTensor> Cat(absl::Span<const DTensor> tensors, int64_t dim);
absl::StatusOr<DTensor> Stack(absl::Span<const DTensor> tensors, int64_t dim);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> JoinOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_JOIN_OPS_H_
