#ifndef DTENSOR_OPS_VOCAB_OPS_H_
#define DTENSOR_OPS_VOCAB_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/nn_functional.h"

namespace dtensor {
namespace ops {

// Cross entropy over a vocabulary (class dim) that may be sharded, with the
// tensor layer's semantics (dtensor/tensor/nn_functional.h), on DTensors; the
// embedding lookups are dtensor/ops/embedding_ops.h's.
// Errors: what CrossEntropy reports (a target out of range, shapes, dtypes),
// inputs on different meshes.
//
// cross_entropy (logits [d0, ..., dk, C] against target [d0, ..., dk]: the
// class dim last, any number of leading dims, each row (a position of the
// leading dims) independent; [N, C] and [N], or [C] and []) with reduction
// none / mean / sum and ignore_index:
//   C sharded ("loss parallel")   the logits are never gathered: the kernel
//                                 all-reduces the rows' max (one value per
//                                 local row) and then the sum of
//                                 exp(logit - max) together with the target
//                                 logit, which only the rank owning the
//                                 target class picks (two per local row),
//                                 over the mesh dims sharding C; target
//                                 Replicate there, the output complete
//                                 (Replicate) there.
//   leading dims sharded          any of them, on any mesh dims (a batch
//                                 sharded on dp with the sequence on cp):
//                                 target sharded alike; none gives per-row
//                                 losses sharded alike; sum gives
//                                 Partial(sum); mean gives Partial(sum) of
//                                 local sums over the GLOBAL count of
//                                 non-ignored targets (unbiased for uneven
//                                 shards), which one all-reduce of 16 bytes
//                                 (the loss sum with the count) over every
//                                 mesh dim sharding a leading dim learns,
//                                 leaving the mean complete.
// These collectives are the strategy's kernel collectives: costed, and
// recorded in the active CommCounters. The registry op has two more outputs,
// which its backward reads so that it communicates nothing of its own (no
// gradient flows into them): the count of non-ignored targets (i64 []:
// complete for mean, which all-reduces it; for none and sum each rank's own,
// Partial(sum) over the mesh dims sharding the leading dims) and the rows'
// log-sum-exp (the target's shape, laid out like the target, complete over the
// classes; f64 for f64 logits, else f32; for ignored rows too).
//
// Registry name and arguments: cross_entropy (logits, target -> loss, count,
// log_sum_exp; "reduction", int: 0 none, 1 mean, 2 sum, default 1;
// "ignore_index", int, default -100).

// The loss (the op's first output). Under a LossParallelScope of the calling
// thread, logits whose class dim is sharded keep it sharded (see there).
absl::StatusOr<DTensor> CrossEntropy(const DTensor& logits,
                                     const DTensor& target,
                                     Reduction reduction = Reduction::kMean,
                                     int64_t ignore_index = -100);

// cross_entropy's gradient of the logits as one op, what its backward runs:
// dlogits = (exp(logits - log_sum_exp) - onehot(target)) * w with w the loss's
// gradient `grad` (per row for none, over `count` for mean; 0 for rows whose
// target is ignore_index), in one pass over each rank's logits block in their
// dtype (dtensor/tensor/loss_backward.h; one kernel on CUDA, no f32 copy of
// the logits, the count read on the device). `log_sum_exp` and `count` are
// the forward's second and third outputs (count only for a mean: undefined
// otherwise). Laid out like the forward: every tensor sharded like the rows
// on the mesh dims sharding a leading dim, the logits alone sharded on the
// class dim (each rank its block, by its class offset), or grad
// Partial(sum | avg) with the rest Replicate (dlogits Partial alike): no
// collective for what the forward gives it.
// Registry name: cross_entropy_backward (logits, target, log_sum_exp, grad,
// count? -> dlogits; cross_entropy's arguments).
// Errors: cross_entropy's on logits and target; log_sum_exp, grad and count
// not of the forward's outputs' shapes and dtypes (count missing for a mean).
absl::StatusOr<DTensor> CrossEntropyBackward(
    const DTensor& logits, const DTensor& target, const DTensor& log_sum_exp,
    const DTensor& grad, const DTensor& count,
    Reduction reduction = Reduction::kMean, int64_t ignore_index = -100);

// PyTorch's loss_parallel() context: while one lives on a thread, the
// CrossEntropy calls of that thread whose logits shard the class dim on some
// mesh dims keep it sharded there (the vocab-parallel kernel: two all-reduces
// of one and two values per local row), whatever the cost model would prefer
// otherwise (gathering or all-to-all-ing the logits, which it may find cheaper
// for few rows or a large vocab, but which materializes them whole on each
// rank). The call runs the op "cross_entropy_loss_parallel": cross_entropy with
// only the class-sharded strategies on those mesh dims (other mesh dims
// unrestricted), the same kernel and backward. Scopes nest; the backward pass,
// which runs outside the forward's scope, needs none. Not copyable.
class LossParallelScope {
 public:
  LossParallelScope();
  ~LossParallelScope();
  LossParallelScope(const LossParallelScope&) = delete;
  LossParallelScope& operator=(const LossParallelScope&) = delete;

  // Whether a scope lives on the calling thread.
  static bool Active();
};

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> VocabOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_VOCAB_OPS_H_
