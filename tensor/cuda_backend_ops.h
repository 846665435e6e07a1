#ifndef DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_
#define DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/cuda/adamw_body.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/tensor.h"

// The tensor kernels on CUDA tensors: what the CPU entry points of
// dtensor/tensor/ (Add, Matmul, Softmax, ...) call when an operand lives on a
// CUDA device. Semantics, dtypes and results are those of the CPU kernels,
// computed by the device kernels of dtensor/tensor/cuda/ on the device's stream
// (so results can differ from the CPU in the last bits where the device's math
// functions or summation order differ). A CPU operand of a binary op (a scalar)
// is copied to the device. Errors: what the CPU kernel reports; operands on
// different CUDA devices; without --config=cuda, every function
// (FailedPrecondition).
namespace dtensor::cuda {

// True when `t` is defined and on a CUDA device.
inline bool OnCuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

absl::StatusOr<Tensor> UnaryOnDevice(UnaryOp op, absl::string_view name,
                                     const Tensor& x);
absl::StatusOr<Tensor> BinaryOnDevice(BinaryOp op, absl::string_view name,
                                      const Tensor& a, const Tensor& b);
// Copies `src` (already of dst's shape, any strides, any dtype, on dst's
// device) into `dst`, converting the dtype.
absl::Status CopyOnDevice(const Tensor& src, const Tensor& dst);
// CopyOnDevice ordered on `stream` (a cudaStream_t of dst's device, such as a
// communicator's) instead of the device's stream.
absl::Status CopyOnStream(const Tensor& src, const Tensor& dst, void* stream);
absl::StatusOr<Tensor> MatmulOnDevice(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> SoftmaxOnDevice(const Tensor& x, int64_t dim, bool log);
absl::StatusOr<Tensor> RmsNormOnDevice(const Tensor& x, const Tensor& weight,
                                       double eps);
// `weight` and `bias` may be undefined (ones, zeros).
absl::StatusOr<Tensor> LayerNormOnDevice(const Tensor& x, const Tensor& weight,
                                         const Tensor& bias, double eps);
// Sum (mean when `mean`), max, min or sum of squares (floating x, an f64
// result as reduction.cc's SumOfSquares; one fused pass) over `dims` (empty:
// all).
absl::StatusOr<Tensor> ReduceOnDevice(ReduceOp op, bool mean,
                                      absl::string_view name, const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      bool keepdim);
absl::StatusOr<Tensor> EmbeddingOnDevice(const Tensor& indices,
                                         const Tensor& table);
// cond ? a : b broadcast to `shape` (the checked broadcast of the three);
// CPU operands are copied to the device of the CUDA ones.
absl::StatusOr<Tensor> WhereOnDevice(const Tensor& cond, const Tensor& a,
                                     const Tensor& b, const Shape& shape);
// The attention softmax in place on contiguous f32 or f64 `scores`
// [..., lq, lk]: scaled by `scale`, keys after query i + (lk - lq) at
// probability 0 when `causal`, a row that sees no key all zeros (the
// materializing fallback of AttentionForwardOnDevice).
absl::Status MaskedSoftmaxOnDevice(const Tensor& scores, int64_t lq, int64_t lk,
                                   bool causal, double scale);
// The rotary embedding of x [outer..., seq, heads, 2 * half] with the angle
// tables cos/sin [seq, half] computed on the host.
absl::StatusOr<Tensor> RotaryOnDevice(const Tensor& x,
                                      const std::vector<double>& cos_table,
                                      const std::vector<double>& sin_table);
// Per row of logits [rows, classes] on a CUDA device, with i64 `targets`
// [rows] on the same device (other than ignore_index, in range): f64
// [2, rows] on the device, row 0 the losses (logsumexp - the target's logit;
// 0 where the target is ignore_index), row 1 every row's logsumexp.
absl::StatusOr<Tensor> CrossEntropyRowsOnDevice(const Tensor& logits,
                                                const Tensor& targets,
                                                int64_t ignore_index);
// The index ops of dtensor/tensor/indexing.h on a CUDA `x`, given the
// normalized `dim` and the index values, read and checked to lie in range on
// the host by the caller (so errors name them as on the CPU); they are copied
// to the device as i64.
absl::StatusOr<Tensor> IndexSelectOnDevice(const Tensor& x, int64_t dim,
                                           const std::vector<int64_t>& rows);
absl::StatusOr<Tensor> GatherOnDevice(const Tensor& x, int64_t dim,
                                      const Shape& index_shape,
                                      const std::vector<int64_t>& picks);
// Duplicate targets add up by atomicAdd, in an order that varies from run to
// run (so the last bits of floating sums do); bf16/f16 accumulate in a float
// buffer rounded once at the end. `src` must be on x's device.
absl::StatusOr<Tensor> ScatterAddOnDevice(const Tensor& x, int64_t dim,
                                          const Shape& index_shape,
                                          const std::vector<int64_t>& targets,
                                          const Tensor& src);
// EmbeddingBackward of a CUDA `grad` [indices..., width] (floating; checked
// by the caller) for the table rows [first_row, first_row + num_rows): row r
// of the [num_rows, width] result sums the rows i of grad with indices[i] ==
// first_row + r; indices outside those rows are skipped on the device. The
// indices, read and checked on the host by the caller, are copied to the
// device as i64 (count values, not an index per gradient element). Duplicates
// add up by atomicAdd in an order that varies from run to run; bf16/f16
// accumulate in a float buffer rounded once at the end.
absl::StatusOr<Tensor> EmbeddingBackwardOnDevice(
    const Tensor& grad, const std::vector<int64_t>& indices, int64_t first_row,
    int64_t num_rows);
// Dropout of a CUDA `x` (floating, 0 <= p < 1): x * (1 / (1 - p)) where the
// uniform float draw of the element's stream position is >= p, else 0; the
// position of the element with multi-index idx is base + idx . position_strides
// (dtensor/ops/random_ops.cc: the global row-major position in the full tensor
// plus the stream offset). Bit for bit the CPU's result.
absl::StatusOr<Tensor> DropoutOnDevice(const Tensor& x, double p, uint64_t seed,
                                       uint64_t base,
                                       const Strides& position_strides);
// The fused AdamW step of dtensor/tensor/adamw_kernel.h on CUDA tensors, in
// place, with the step's constants `k`; the operands are checked by AdamWStep.
absl::Status AdamWStepOnDevice(const Tensor& param, const Tensor& exp_avg,
                               const Tensor& exp_avg_sq, const Tensor& grad,
                               const AdamWCoefficients<double>& k);
absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor& logits,
                                            const Tensor& target,
                                            Reduction reduction,
                                            int64_t ignore_index);
// NormBackward (dtensor/tensor/norm_backward.h) of a CUDA `x`, its operands
// checked by the caller: dweight when `weight` is defined, dbias when
// `want_dbias` (LayerNorm only).
absl::StatusOr<NormGrads> NormBackwardOnDevice(const Tensor& x,
                                               const Tensor& weight,
                                               const Tensor& grad, double eps,
                                               bool layer_norm,
                                               bool want_dbias);
// Loss parallel's cross entropy steps (dtensor/tensor/cuda/loss_kernels.h)
// over CUDA logits [rows, classes], this rank's class block starting at class
// `class_offset`, and i64 `targets` [rows] on their device; values in the
// compute dtype (f32, or f64 for f64 logits), which the caller all-reduces
// over the class group between the steps (dtensor/ops/vocab_ops.cc):
// each row's max [rows]; the sums [2, rows] of exp(logit - row_max) and of
// the target's logit (0 where the block lacks it); and from the all-reduced
// two, f64 [2, rows]: the losses (0 where the target is ignore_index) and the
// log-sum-exps.
absl::StatusOr<Tensor> LossShardMaxOnDevice(const Tensor& logits);
absl::StatusOr<Tensor> LossShardSumsOnDevice(const Tensor& logits,
                                             const Tensor& targets,
                                             const Tensor& row_max,
                                             int64_t class_offset);
absl::StatusOr<Tensor> LossShardFinishOnDevice(const Tensor& row_max,
                                               const Tensor& sums,
                                               const Tensor& targets,
                                               int64_t ignore_index);
// ScaledDotProductAttention and its backward (dtensor/tensor/attention.h) on
// CUDA operands checked by the caller, with the output batch shape `batch`
// and the effective `scale` (> 0): the tiled kernels of
// dtensor/tensor/cuda/attention_kernels.h. Where a block's tiles need more
// shared memory than the device grants (large head dims), the forward
// multiplies on cuBLAS around materialized scores and the backward runs on
// the host (copies).
absl::StatusOr<Tensor> AttentionForwardOnDevice(const Tensor& q,
                                                const Tensor& k,
                                                const Tensor& v,
                                                const Shape& batch, bool causal,
                                                double scale);
absl::StatusOr<AttentionGrads> AttentionBackwardOnDevice(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Shape& batch, bool causal, double scale);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_
