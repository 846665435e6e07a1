#ifndef DTENSOR_TENSOR_REDUCTION_H_
#define DTENSOR_TENSOR_REDUCTION_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Reductions over any set of dims (negative dims allowed, no repeats). An empty
// `dims` reduces over all dims. With keepdim the reduced dims stay as size 1.
// Floating inputs accumulate in double; bf16/f16 results are rounded back.
// sum of integers/bool gives i64; sum of nothing is 0 and mean of nothing is
// NaN.
// Errors: mean and var of a non-floating dtype; max/min/argmax over an empty
// extent; a dim out of range or repeated; a tensor not on the CPU.
//
// A 0-d tensor accepts dim 0 or -1 (nothing to reduce). Var divides by
// max(n - correction, 0), so one element with correction 1 gives NaN, as in
// torch. max/min propagate NaN and argmax takes a NaN as the maximum.

absl::StatusOr<Tensor> Sum(const Tensor& a, absl::Span<const int64_t> dims = {},
                           bool keepdim = false);
absl::StatusOr<Tensor> Mean(const Tensor& a,
                            absl::Span<const int64_t> dims = {},
                            bool keepdim = false);
absl::StatusOr<Tensor> Max(const Tensor& a, absl::Span<const int64_t> dims = {},
                           bool keepdim = false);
absl::StatusOr<Tensor> Min(const Tensor& a, absl::Span<const int64_t> dims = {},
                           bool keepdim = false);
// Variance with `correction` (1 = unbiased, 0 = population).
absl::StatusOr<Tensor> Var(const Tensor& a, absl::Span<const int64_t> dims = {},
                           int64_t correction = 1, bool keepdim = false);
// The sum of the squares of the elements, in one pass with no temporaries
// (f64 accumulation and result, whatever the floating input dtype): the
// squared 2-norm that gradient clipping needs. On a CUDA device it is one
// fused reduction pass (no temporaries).
// Errors: a non-floating dtype; dims as Sum.
absl::StatusOr<Tensor> SumOfSquares(const Tensor& a,
                                    absl::Span<const int64_t> dims = {},
                                    bool keepdim = false);
// Index (i64) of the first maximum along one dim.
absl::StatusOr<Tensor> Argmax(const Tensor& a, int64_t dim,
                              bool keepdim = false);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_REDUCTION_H_
