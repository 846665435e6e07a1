#ifndef DTENSOR_TENSOR_MATMUL_H_
#define DTENSOR_TENSOR_MATMUL_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// torch.matmul semantics for 1-D..n-D operands: 1-D x 1-D is a dot product
// (0-d result); a 1-D left operand is a row vector and a 1-D right operand a
// column vector (their dim is removed from the result); leading dims are batch
// dims and broadcast. f32 and f64 run on OpenBLAS sgemm/dgemm (transposed
// operands are passed as such, not copied); bf16/f16 compute in f32.
// Errors: integer or bool dtypes, dtypes that differ, inner dims that differ,
// batch dims that do not broadcast, a 0-d operand, an undefined operand.
absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b);

// a @ b^T + bias (bias optional: pass an undefined Tensor), `a` [..., in],
// `weight` [out, in], `bias` [out].
// Errors: shapes other than these, dtypes that differ, what Matmul reports.
absl::StatusOr<Tensor> Linear(const Tensor& a, const Tensor& weight,
                              const Tensor& bias);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_MATMUL_H_
