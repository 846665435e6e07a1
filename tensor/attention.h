#ifndef DTENSOR_TENSOR_ATTENTION_H_
#define DTENSOR_TENSOR_ATTENTION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/tensor/tensor.h"

// The tiled attention behind ScaledDotProductAttention
// (dtensor/tensor/nn_functional.h, whose semantics it keeps) and its
// backward. Both walk [query tile, key tile] blocks (FlashAttention-2 style,
// the bodies in dtensor/tensor/cuda/attention_body.h) and never make an
// [Lq, Lk] matrix, on the CPU (tile products on BLAS, one host worker) and on
// a CUDA device (the kernels of dtensor/tensor/cuda/attention_kernels.h).
namespace dtensor {

// The scale ScaledDotProductAttention multiplies q.k by for a `scale`
// argument and a head dim `e`: `scale` when > 0, else 1 / sqrt(e) (1 for
// e = 0, where every score is 0 and 1 avoids 0 * inf).
double AttentionScale(double scale, int64_t e);

// The output shape [batch..., Lq, Ev] of attention over q [..., Lq, E],
// k [..., Lk, E] and v [..., Lk, Ev], whose leading dims broadcast to the
// batch shape `batch`.
// Errors: an operand of fewer than 2 dims, E or Lk not matching, leading
// dims that do not broadcast (messages start with `op` and name the three
// shapes).
absl::StatusOr<Shape> AttentionOutputShape(const Shape& q, const Shape& k,
                                           const Shape& v,
                                           absl::string_view op);

// The gradients of one attention call, of q's, k's and v's shapes and dtype.
struct AttentionGrads {
  Tensor dq;
  Tensor dk;
  Tensor dv;
};

// The gradients of out = ScaledDotProductAttention(q, k, v, causal, scale)
// with respect to q, k and v, given `out` and its gradient `grad_out`
// ([batch..., Lq, Ev], the broadcast batch; `out` must be the forward's
// result for these inputs: delta = sum(grad_out * out) over Ev stands in for
// sum(dp * p)). Each gradient is summed over the batch dims its operand was
// broadcast on (grouped-query k and v get the sum over their query group). The
// attention weights are recomputed from q and k tile by tile (their
// log-sum-exps in a first pass over the keys), so the memory beyond the
// operands and gradients is O(rows); a query that sees no key contributes
// nothing. bf16/f16 compute in f32 and round once, f64 in f64. On CUDA, head
// dims whose tiles do not fit the device's shared memory (about E + Ev > 700
// for f32) are computed on the host.
// Errors: those of ScaledDotProductAttention; out or grad_out not of the
// output's shape, or of another dtype or device than q.
absl::StatusOr<AttentionGrads> ScaledDotProductAttentionBackward(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, bool causal, double scale = 0.0);

// An attention's output and the log-sum-exp of each query row's scaled,
// masked scores: lse [batch..., Lq] in the compute dtype (f64 for f64 inputs,
// f32 otherwise), -inf for a query that sees no key (its output row is 0).
// Attention over a sequence of key blocks is the lse-weighted merge of the
// blocks' results (MergeAttentionBlock), which ring attention relies on.
struct AttentionWithLse {
  Tensor out;
  Tensor lse;
};

// The dtype of the log-sum-exps of inputs of `dtype`: f64 for f64, else f32.
DType AttentionLseDType(DType dtype);

// ScaledDotProductAttention with the rows' log-sum-exps.
// Errors: those of ScaledDotProductAttention.
absl::StatusOr<AttentionWithLse> ScaledDotProductAttentionWithLse(
    const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
    double scale = 0.0);

// ScaledDotProductAttentionBackward with each row's log-sum-exp `lse` given
// (as ScaledDotProductAttentionWithLse returns it) instead of recomputed.
// `out` and `lse` may belong to a larger attention over more keys of which
// k and v are one block: the gradients are then this block's share (dq this
// block's term, dk and dv exact), which is how a ring attention's backward
// runs block by block.
// Errors: those of ScaledDotProductAttentionBackward; lse not of shape
// [batch..., Lq], or not in the compute dtype on q's device.
absl::StatusOr<AttentionGrads> ScaledDotProductAttentionBackwardWithLse(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor& lse, bool causal, double scale = 0.0);

// Folds `block` (the attention of the same queries over other keys) into
// `acc`: acc.out becomes the lse-weighted mean of both outputs (in acc.out's
// dtype: keep it f32 over many merges of bf16 blocks, each merge rounds to
// it) and acc.lse the log of the summed exps. An undefined acc.out takes
// `block` as it is. Rows that see no key (lse -inf) in either keep the
// other's values.
// Errors: shapes, lse dtypes or devices that differ.
absl::Status MergeAttentionBlock(AttentionWithLse& acc,
                                 const AttentionWithLse& block);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_ATTENTION_H_
