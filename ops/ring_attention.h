#ifndef DTENSOR_OPS_RING_ATTENTION_H_
#define DTENSOR_OPS_RING_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/sequence_blocks.h"
#include "dtensor/tensor/tensor.h"

// Ring attention: attention whose queries, keys and values are sharded on
// their sequence dim over a context-parallel (cp) mesh dim, computed without
// gathering the keys. Each rank's queries meet every rank's key/value block
// as the blocks travel around the ring of the cp dim (the permute
// collective; the next block's transfer starts before the current block's
// compute), and the partial results merge by their log-sum-exps
// (MergeAttentionBlock, dtensor/tensor/attention.h). The backward sends the
// blocks around once more with their key/value gradients, which arrive home
// complete. A rank keeps at most two key/value blocks, never the sequence.
namespace dtensor {
namespace ops {

struct RingAttentionOptions {
  // The cp mesh dim.
  int64_t mesh_dim = 0;
  SequenceOrder order = SequenceOrder::kBalanced;
  // The causal mask of ScaledDotProductAttention (query i sees keys
  // j <= i + Lk - Lq), on global positions.
  bool causal = false;
  // 0: 1 / sqrt(E).
  double scale = 0.0;
};

// The output of RingAttention: `out` [..., Lq, Ev] with q's placements, and
// this rank's rows' log-sum-exps ([local batch..., local Lq], as
// ScaledDotProductAttentionWithLse gives them), which the backward takes.
struct RingAttentionResult {
  DTensor out;
  Tensor lse;
};

// Attention of q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] (the
// semantics of ScaledDotProductAttention, grouped-query broadcasting
// included) whose sequence dims (-2) are Shard over options.mesh_dim in
// options.order. Every rank of the cp dim must call it. Other mesh dims may
// shard batch or head dims alike in q, k and v (tp, dp).
// Errors: inputs on different meshes or of other placements than that (a
// Partial, a sharded E or Ev, the sequence sharded elsewhere, placements
// that differ between q, k and v), a bad mesh dim, a kBalanced length not
// divisible by 2 * cp, what the local attention reports. Under a
// metadata-only runtime: the output's spec (lse undefined), the ring's
// transfers counted (CommCounter), nothing computed.
absl::StatusOr<RingAttentionResult> RingAttention(
    const DTensor& q, const DTensor& k, const DTensor& v,
    const RingAttentionOptions& options);

// {dq, dk, dv} of RingAttention given its `out` and `lse` and the gradient
// `grad_out` (out's placements), each with its input's spec.
// Errors: those of RingAttention; out, lse or grad_out not those of the
// forward's shapes.
absl::StatusOr<std::vector<DTensor>> RingAttentionBackward(
    const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& out,
    const Tensor& lse, const DTensor& grad_out,
    const RingAttentionOptions& options);

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_RING_ATTENTION_H_
