#ifndef DTENSOR_OPS_CAST_OPS_H_
#define DTENSOR_OPS_CAST_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {
namespace ops {

// dtype conversion of a DTensor, with the tensor layer's rules
// (Tensor::To(DType)). Every dim keeps its shards. A Partial passes through
// where converting the terms commutes with reducing them:
//   the same dtype                        any Partial;
//   to a wider floating dtype             sum and avg (no term is rounded);
//   any conversion but i64 -> i32 (which  max and min (the conversion is
//   wraps) and to bool (x != 0)           nondecreasing);
// otherwise the input is reduced first (a narrowing conversion of a sum's
// terms would round each of them).
//
// Registry name: to; argument "dtype" (int: the DType enumerator, 0 f32,
// 1 f64, 2 bf16, 3 f16, 4 i32, 5 i64, 6 bool).
// Errors: an undefined input, an unknown dtype enumerator.

absl::StatusOr<DTensor> To(const DTensor& x, DType dtype);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> CastOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_CAST_OPS_H_
