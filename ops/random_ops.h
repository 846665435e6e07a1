#ifndef DTENSOR_OPS_RANDOM_OPS_H_
#define DTENSOR_OPS_RANDOM_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Random ops whose result does not depend on the sharding: the random number
// of an element comes from its GLOBAL position, so every rank draws exactly
// the numbers of its own block, whatever the sharding (and replicas draw the
// same ones).
//
// dropout(x, p, seed, offset): element i (row-major index in the global
// tensor) is kept, scaled by 1 / (1 - p), when draw offset + i of the Philox
// stream of `seed` (dtensor/tensor/generator.h: Generator(seed, offset + i)
// .NextUniformFloat()) is >= p, and zeroed otherwise. Every dim keeps its
// shards, and any Partial passes through (the same mask scales every term).
// Successive calls advance `offset` (by the element count) to draw fresh
// numbers under one seed.
//
// Registry name: dropout; arguments "p" (scalar), "seed" (int, the 64-bit
// seed's bits), "offset" (scalar, a whole number in [0, 2^53), default 0).
// p and offset are scalars, so calls that only advance the offset share one
// propagation.
// Errors: p outside [0, 1], a non-floating x, an offset outside [0, 2^53).

absl::StatusOr<DTensor> Dropout(const DTensor& x, double p, uint64_t seed,
                                uint64_t offset = 0);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> RandomOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_RANDOM_OPS_H_
