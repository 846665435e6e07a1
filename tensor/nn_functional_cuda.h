#ifndef DTENSOR_TENSOR_NN_FUNCTIONAL_CUDA_H_
#define DTENSOR_TENSOR_NN_FUNCTIONAL_CUDA_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// The nn functions of nn_functional.h on CUDA tensors (cuda_entry.h):
// softmax, the embedding and its backward, the rotary embedding, and dropout
// (dtensor/ops/random_ops.cc). The norms are in norm_cuda.h, cross entropy in
// loss_cuda.h, the attention in attention_cuda.h.
namespace dtensor::cuda {

absl::StatusOr<Tensor> SoftmaxOnDevice(const Tensor& x, int64_t dim, bool log);
absl::StatusOr<Tensor> EmbeddingOnDevice(const Tensor& indices,
                                         const Tensor& table);
// Embedding of a CUDA `table`: CUDA indices are range-checked on the device,
// deferred (index_checks.h), CPU indices at once.
// EmbeddingBackward of a CUDA `grad` [indices..., width] (floating; checked
// by the caller) for the table rows [first_row, first_row + num_rows): row r
// of the [num_rows, width] result sums the rows i of grad with indices[i] ==
// first_row + r; indices outside those rows are skipped on the device. The
// indices are checked against `table_rows` as the embedding's are, and used
// on the device as i64. A device sort groups each row's tokens
// (index_kernels.h LaunchEmbeddingBackward): a row's sum is taken in float
// (double for f64) in position order and rounded once, the CPU kernel's
// result bit for bit, the same every run; rows no token names are 0.
absl::StatusOr<Tensor> EmbeddingBackwardOnDevice(const Tensor& indices,
                                                 const Tensor& grad,
                                                 int64_t table_rows,
                                                 int64_t first_row,
                                                 int64_t num_rows);
// The rotary embedding of x [outer..., seq, heads, 2 * half] with the angle
// tables cos/sin (contiguous f64 [seq, half] on x's device: rotary_tables.h).
// Errors: tables of another shape, dtype or device.
absl::StatusOr<Tensor> RotaryOnDevice(const Tensor& x, const Tensor& cos_table,
                                      const Tensor& sin_table);
// Dropout of a CUDA `x` (floating, 0 <= p < 1): x * (1 / (1 - p)) where the
// uniform float draw of the element's stream position is >= p, else 0; the
// position of the element with multi-index idx is base + idx . position_strides
// (dtensor/ops/random_ops.cc: the global row-major position in the full tensor
// plus the stream offset). Bit for bit the CPU's result.
absl::StatusOr<Tensor> DropoutOnDevice(const Tensor& x, double p, uint64_t seed,
                                       uint64_t base,
                                       const Strides& position_strides);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_NN_FUNCTIONAL_CUDA_H_
