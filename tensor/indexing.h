#ifndef DTENSOR_TENSOR_INDEXING_H_
#define DTENSOR_TENSOR_INDEXING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Index ops with torch semantics. Index tensors are i32 or i64.
// Errors: an index out of range (naming it and the bound), an index tensor
// of another dtype, a dim out of range, shapes other than documented.

// Entries of `x` at 1-D `index` along `dim`.
absl::StatusOr<Tensor> IndexSelect(const Tensor& x, int64_t dim,
                                   const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (and so on).
// Errors: `index` not of x's rank, or larger than x on another dim.
absl::StatusOr<Tensor> Gather(const Tensor& x, int64_t dim,
                              const Tensor& index);
// A copy of `x` with src[i][j][k] added at x[i][index[i][j][k]][k] (dim 1).
absl::StatusOr<Tensor> ScatterAdd(const Tensor& x, int64_t dim,
                                  const Tensor& index, const Tensor& src);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_INDEXING_H_
