#ifndef DTENSOR_OPS_BACKWARD_HELPERS_H_
#define DTENSOR_OPS_BACKWARD_HELPERS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/tensor.h"

// Small pieces shared by the ops' backward definitions (OpDef::backward) and
// by autograd (dtensor/nn/autograd.h). Every DTensor they make lives on the
// mesh and runtime of `like` and is built locally, without communication; under
// a metadata-only runtime it has no data.
namespace dtensor {
namespace ops {

// The gradients of an op's inputs: one per input, undefined where an input
// gets none.
using InputGrads = std::vector<DTensor>;

// The gradient of a broadcast result summed back to the `shape` of an operand
// that broadcast to it: over the leading dims broadcasting added and the
// size-1 dims it expanded. `grad` itself when the shapes are equal.
absl::StatusOr<DTensor> SumToShape(const DTensor& grad, const Shape& shape);

// ScalarLike, FullWithSharding, FullLike and ArangeAlong put their data on
// the device of like's local tensor (the CPU when it has none), where the
// collectives over like's mesh work.

// `value` as a 0-d Replicate DTensor of `dtype` (default: like's).
absl::StatusOr<DTensor> ScalarLike(const DTensor& like, double value);
absl::StatusOr<DTensor> ScalarLike(const DTensor& like, double value,
                                   DType dtype);

// A DTensor of `shape` and `dtype` filled with `value`, laid out by
// `sharding`.
// Requires: `sharding` has no Partial unless value is 0 (whose terms may all
//   be 0); debug-checked.
absl::StatusOr<DTensor> FullWithSharding(const DTensor& like,
                                         const Shape& shape,
                                         const Sharding& sharding, double value,
                                         DType dtype);

// `value` everywhere, in like's shape, dtype and sharding without Partials.
absl::StatusOr<DTensor> FullLike(const DTensor& like, double value);

// `full` (the same tensor on every rank) as a Replicate DTensor.
absl::StatusOr<DTensor> ReplicatedConstant(const DTensor& like,
                                           const Tensor& full);

// 0, 1, ..., like.shape()[dim] - 1 as a 1-D DTensor of the integer `dtype`,
// sharded like `dim` of `like` (Replicate elsewhere): indices that line up
// with like's shards of that dim. The local block is cached per device
// (CachedArange): shared, read-only.
absl::StatusOr<DTensor> ArangeAlong(const DTensor& like, int64_t dim,
                                    DType dtype);

// Whether `partial`'s sharding is `complete`'s with one or more of its
// Replicate mesh dims Partial(sum) instead, on the same mesh: the condition
// of AddCompleteToPartial.
bool CanAddCompleteToPartial(const DTensor& partial, const DTensor& complete);

// partial + complete, laid out as `partial` (Requires:
// CanAddCompleteToPartial): the complete term is added on the ranks at
// coordinate 0 along the mesh dims where partial is Partial and complete
// Replicate, the other ranks keep their partial terms. (Add would turn
// `complete` Partial first: fresh zeros on the other ranks, added there.) No
// collective. Errors: InvalidArgument (naming both specs) when the
// shardings do not fit; the local addition's errors.
absl::StatusOr<DTensor> AddCompleteToPartial(const DTensor& partial,
                                             const DTensor& complete);

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_BACKWARD_HELPERS_H_
