#ifndef DTENSOR_OPS_EINSUM_STRATEGY_H_
#define DTENSOR_OPS_EINSUM_STRATEGY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/ops/strategy.h"

namespace dtensor {

// The strategies of an op that computes every output element from the input
// elements at the same loop coordinates ("einsum" ops: matmul with batch dims
// M, K, N; elementwise ops with one loop per output dim; reductions, whose
// reduced loops appear in no output). On one mesh dim it may:
//   - replicate everything;
//   - shard a loop dim that every output iterates: the tensors iterating it
//     are Shard on it, the other inputs Replicate (a loop no input iterates
//     is never sharded: the kernel could not compute that block);
//   - shard a loop dim that no output iterates (a contraction): the inputs
//     iterating it are Shard, `contraction_partners` Partial, the other
//     inputs Replicate, and output j is Partial(contraction[j]);
//   - pass Partial through: for a rule and one of its ops, the rule's inputs
//     are Partial(op), the others Replicate, and the outputs Partial(op).
struct EinsumSpec {
  LoopDims loops;
  int num_loops = 0;

  // How each output combines the per-rank results of a sharded contracted
  // loop: sum for matmul and sum/mean (whose kernel scales by the global
  // count), max / min for those reductions. Empty: contracted loops are never
  // sharded.
  std::vector<ReduceOp> contraction;
  // Inputs that lack a contracted loop but are added to the contraction's
  // result (the bias of linear and addmm): Partial(sum) with it.
  std::vector<int> contraction_partners;

  // The op commutes with the reduction `ops` applied jointly to `inputs`
  // (the others held Replicate): add and sub {0, 1} with sum and avg; mul
  // {0} and {1}; where {1, 2} with every op; relu {0} with max and min.
  struct PartialRule {
    std::vector<int> inputs;
    std::vector<ReduceOp> ops;
  };
  std::vector<PartialRule> partial_rules;
};

// The options of one mesh dim, as described above (the same for every mesh
// dim). `present[i]` tells whether input i is given; an absent input is
// Replicate in every option and never constrains one.
// Requires: `spec.loops` has a list per input and output, each loop dim in
// [0, spec.num_loops) or kNoLoop; `present` has an entry per input; the
// indices in contraction_partners and partial_rules are inputs; `contraction`
// is empty or has an entry per output.
std::vector<DimStrategy> EinsumDimStrategies(const EinsumSpec& spec,
                                             absl::Span<const bool> present);

// EinsumDimStrategies on every mesh dim, combined by CombineMeshDims; the
// inputs present are those ctx.inputs gives (non-null).
// Requires: as EinsumDimStrategies.
// Errors: those of CombineMeshDims (more than kMaxStrategies combinations).
absl::StatusOr<std::vector<OpStrategy>> EinsumStrategies(
    const StrategyContext& ctx, const EinsumSpec& spec);

// The loop dims of a tensor of `shape` broadcast (right-aligned, NumPy rules)
// to `out_shape`, whose dim k iterates loop `first_loop + k`: a size-1 dim
// against a larger one iterates kNoLoop.
// Requires: `shape` broadcasts to `out_shape` (the op's shape inference
// checked it): no more dims, each 1 or equal to its aligned dim.
std::vector<int> BroadcastLoops(absl::Span<const int64_t> shape,
                                absl::Span<const int64_t> out_shape,
                                int first_loop = 0);

}  // namespace dtensor

#endif  // DTENSOR_OPS_EINSUM_STRATEGY_H_
