#ifndef DTENSOR_OPS_REDUCTION_OPS_H_
#define DTENSOR_OPS_REDUCTION_OPS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Reductions over any set of dims (negative allowed; empty = all dims), with
// keepdim, as in dtensor/tensor/reduction.h. A sharded reduced dim needs no
// communication: each rank reduces its shard and the output is Partial:
//   sum, mean      Partial(sum); mean divides each rank's local sum by the
//                  GLOBAL element count, so uneven shards give no bias
//   amax, max      Partial(max)    (a rank whose shard of the reduced dims is
//   amin, min      Partial(min)     empty contributes -inf / +inf, or the
//                                   dtype's lowest / highest integer)
// Non-reduced dims keep their shards; a Partial input passes through where
// the reduction commutes with it (sum and mean: sum and avg; amax: max;
// amin: min). Integer and bool sums give i64.
// Errors: mean of a non-floating dtype; a max or min over an empty global
// extent; what the tensor layer's reductions report.
//
// Registry names: sum, mean, amax, amin, max, min (max and min are amax and
// amin: the values, no indices), aminmax (two outputs: min, max),
// sum_squares. Arguments: "dims" (kInts, default all) and "keepdim" (kBool,
// default false).

// Sum, Mean, Amax, Amin, Max and Min, all of one signature.
#define DTENSOR_DECLARE_REDUCTION(Name)                             \
  absl::StatusOr<DTensor> Name(const DTensor& x,                    \
                               absl::Span<const int64_t> dims = {}, \
                               bool keepdim = false);
DTENSOR_DECLARE_REDUCTION(Sum)
DTENSOR_DECLARE_REDUCTION(Mean)
DTENSOR_DECLARE_REDUCTION(Amax)
DTENSOR_DECLARE_REDUCTION(Amin)
DTENSOR_DECLARE_REDUCTION(Max)
DTENSOR_DECLARE_REDUCTION(Min)
#undef DTENSOR_DECLARE_REDUCTION

// The sum of x^2 in f64, one pass over each shard (dtensor/tensor/reduction.h's
// SumOfSquares): sharded dims give Partial(sum); a Partial input is
// completed first, since squares of terms do not add up. Errors: a
// non-floating dtype.
absl::StatusOr<DTensor> SumOfSquares(const DTensor& x,
                                     absl::Span<const int64_t> dims = {},
                                     bool keepdim = false);
// (min, max) in one pass over the shardings, like torch.aminmax.
absl::StatusOr<std::pair<DTensor, DTensor>> Aminmax(
    const DTensor& x, absl::Span<const int64_t> dims = {},
    bool keepdim = false);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> ReductionOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_REDUCTION_OPS_H_
