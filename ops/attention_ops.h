#ifndef DTENSOR_OPS_ATTENTION_OPS_H_
#define DTENSOR_OPS_ATTENTION_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// The tensor layer's ScaledDotProductAttention and its backward
// (dtensor/tensor/nn_functional.h, dtensor/tensor/attention.h: the same
// semantics and dtypes, tiled: no [Lq, Lk] matrix) on DTensors. Errors: what
// the tensor layer reports; inputs on different meshes. Neither communicates
// itself; a dim the rules need whole is gathered by the engine first:
//   scaled_dot_product_attention
//                          q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev]:
//                          the leading (batch, head) dims sharded alike in all
//                          three (Replicate where broadcast); Lq sharded in q
//                          and the output with k and v Replicate (causal
//                          included: each rank masks by its queries' global
//                          positions); Ev sharded in v and the output; v
//                          Partial(sum | avg) with q, k Replicate. E and Lk
//                          are never sharded. A second output, kept for
//                          the backward only (OpDef::num_saved_outputs), is
//                          the rows' log-sum-exps [batch..., Lq]
//                          (AttentionLseDType: f32, f64 for f64 inputs),
//                          sharded like the output on batch dims and Lq and
//                          Replicate otherwise (Ev sharded, v Partial: every
//                          rank has every row's whole lse; never Partial).
//   scaled_dot_product_attention_backward
//                          (q, k, v, out, grad_out[, lse]) -> (dq, dk, dv),
//                          what the forward's backward runs (given the
//                          forward's lse, which it then does not recompute:
//                          a pass over q·k^T less): one fused local pass. A
//                          batch dim, Lq or Ev sharded alike in the inputs
//                          that iterate it (Replicate where broadcast, out
//                          and grad_out like the output) gives each gradient
//                          sharded where its input iterates that dim and
//                          Partial(sum) elsewhere: Lq-sharded queries give dq
//                          sharded, dk and dv Partial(sum) (causal: each rank
//                          keeps the forward's keys, dk and dv 0 past them);
//                          grouped-query k, v Replicate on a sharded head dim
//                          give dk, dv Partial(sum); Ev-sharded v, out and
//                          grad_out give dv sharded, dq and dk Partial(sum).
//                          grad_out Partial(sum | avg) with the rest
//                          Replicate gives the same Partial gradients. The
//                          lse is sharded like the output's rows on a batch
//                          dim or Lq, Replicate otherwise. Its own backward
//                          (double differentiation) goes through
//                          materialized [Lq, Lk] weights.
//
// Registry names and arguments: scaled_dot_product_attention (q, k, v;
// "causal", bool, false; "scale", scalar, 0 = 1/sqrt(E));
// scaled_dot_product_attention_backward (q, k, v, out, grad_out, optional
// lse; the same arguments).

absl::StatusOr<DTensor> ScaledDotProductAttention(const DTensor& q,
                                                  const DTensor& k,
                                                  const DTensor& v,
                                                  bool causal = false,
                                                  double scale = 0.0);

// {dq, dk, dv}: the gradients of out = ScaledDotProductAttention(q, k, v,
// causal, scale) given `out` and its gradient `grad_out`, each of its
// input's shape (summed over the batch dims it was broadcast on).
absl::StatusOr<std::vector<DTensor>> ScaledDotProductAttentionBackward(
    const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& out,
    const DTensor& grad_out, bool causal = false, double scale = 0.0);

// ScaledDotProductAttentionBackward given the forward's log-sum-exps `lse`
// [batch..., Lq] (the forward op's saved output; undefined: recomputed).
// Errors: those of ScaledDotProductAttentionBackward; lse not of that shape
// or not of AttentionLseDType of q's dtype.
absl::StatusOr<std::vector<DTensor>> ScaledDotProductAttentionBackwardWithLse(
    const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& out,
    const DTensor& grad_out, const DTensor& lse, bool causal = false,
    double scale = 0.0);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> AttentionOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_ATTENTION_OPS_H_
