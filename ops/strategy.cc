#include "dtensor/ops/strategy.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

std::string OpStrategy::ToString() const {
  std::vector<std::string> ins;
  for (const Sharding& s : inputs) {
    ins.push_back(
        absl::StrCat("[", s.mesh_ndim() == 0 ? "-" : s.ToString(), "]"));
  }
  std::vector<std::string> outs;
  for (const Sharding& s : outputs) {
    outs.push_back(absl::StrCat("[", s.ToString(), "]"));
  }
  return absl::StrCat(absl::StrJoin(ins, " "), " -> ",
                      absl::StrJoin(outs, " "));
}

bool PartialAllowed(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::kAvg:
      return IsFloatingPoint(dtype);
    case ReduceOp::kSum:
      return dtype != DType::kBool;
    default:
      return true;
  }
}

bool PartialsAllowed(const Sharding& sharding, DType dtype) {
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    const Placement& p = sharding.placement(m);
    if (p.is_partial() && !PartialAllowed(p.reduce_op(), dtype)) return false;
  }
  return true;
}

namespace {

// Whether option `c` of mesh dim `m` can be part of a valid strategy: every
// input can reach its placement there and every Partial can be reduced.
bool OptionViable(const StrategyContext& ctx, const DimStrategy& c, int64_t m) {
  for (size_t i = 0; i < c.inputs.size() && i < ctx.inputs.size(); ++i) {
    const Placement& required = c.inputs[i];
    if (ctx.inputs[i] == nullptr || !required.is_partial()) continue;
    const Placement& current = ctx.inputs[i]->sharding().placement(m);
    if ((current != required && !current.is_replicate()) ||
        !PartialAllowed(required.reduce_op(), ctx.inputs[i]->dtype())) {
      return false;
    }
  }
  for (size_t j = 0; j < c.outputs.size() && j < ctx.outputs.size(); ++j) {
    const Placement& p = c.outputs[j];
    if (p.is_partial() &&
        !PartialAllowed(p.reduce_op(), ctx.outputs[j].dtype)) {
      return false;
    }
  }
  return true;
}

// One tensor of the op seen by the combination: its loop dims and, for an
// input, the sharding it arrives with (null for outputs and absent inputs).
struct TensorSlot {
  const std::vector<int>* loops;
  const Sharding* current;
  bool is_input;
  int index;
};

// The placement of `slot` in candidate `c`.
const Placement& PlacementIn(const DimStrategy& c, const TensorSlot& slot) {
  return slot.is_input ? c.inputs[slot.index] : c.outputs[slot.index];
}

// The mesh dims that shard each loop dim in one combination, ascending.
using LoopMeshDims = std::map<int, std::vector<int64_t>>;

absl::StatusOr<LoopMeshDims> MeshDimsPerLoop(
    absl::Span<const DimStrategy* const> combination,
    absl::Span<const TensorSlot> slots) {
  LoopMeshDims per_loop;
  for (int64_t m = 0; m < static_cast<int64_t>(combination.size()); ++m) {
    for (const TensorSlot& slot : slots) {
      const Placement& p = PlacementIn(*combination[m], slot);
      if (!p.is_shard()) continue;
      const int loop = p.dim() < static_cast<int64_t>(slot.loops->size())
                           ? (*slot.loops)[p.dim()]
                           : kNoLoop;
      if (loop == kNoLoop) {
        return absl::InternalError(absl::StrCat(
            "strategy candidate shards ", slot.is_input ? "input " : "output ",
            slot.index, " on dim ", p.dim(), ", which iterates no loop dim"));
      }
      std::vector<int64_t>& dims = per_loop[loop];
      if (dims.empty() || dims.back() != m) dims.push_back(m);
    }
  }
  // Every tensor on a sharded loop dim must be split by all its mesh dims.
  for (int64_t m = 0; m < static_cast<int64_t>(combination.size()); ++m) {
    for (const TensorSlot& slot : slots) {
      const Placement& p = PlacementIn(*combination[m], slot);
      for (size_t d = 0; d < slot.loops->size(); ++d) {
        const int loop = (*slot.loops)[d];
        if (loop == kNoLoop) continue;
        auto it = per_loop.find(loop);
        const bool loop_sharded =
            it != per_loop.end() &&
            std::find(it->second.begin(), it->second.end(), m) !=
                it->second.end();
        const bool tensor_sharded =
            p.is_shard() && p.dim() == static_cast<int64_t>(d);
        if (loop_sharded != tensor_sharded) {
          return absl::InternalError(absl::StrCat(
              "strategy candidate of mesh dim ", m, " shards loop dim ", loop,
              " in some tensors but not in ",
              slot.is_input ? "input " : "output ", slot.index));
        }
      }
    }
  }
  return per_loop;
}

// The nesting orders worth trying for a loop dim sharded by `mesh_dims`
// (ascending): each input's current order on it, then the default.
std::vector<std::vector<int64_t>> CandidateOrders(
    int loop, const std::vector<int64_t>& mesh_dims,
    absl::Span<const TensorSlot> slots) {
  std::vector<std::vector<int64_t>> orders;
  const auto add = [&](std::vector<int64_t> order) {
    if (std::find(orders.begin(), orders.end(), order) == orders.end()) {
      orders.push_back(std::move(order));
    }
  };
  for (const TensorSlot& slot : slots) {
    if (slot.current == nullptr) continue;
    for (size_t d = 0; d < slot.loops->size(); ++d) {
      if ((*slot.loops)[d] != loop) continue;
      std::vector<int64_t> order;
      for (int64_t m : slot.current->MeshDimsSharding(d)) {
        if (std::find(mesh_dims.begin(), mesh_dims.end(), m) !=
            mesh_dims.end()) {
          order.push_back(m);
        }
      }
      for (int64_t m : mesh_dims) {
        if (std::find(order.begin(), order.end(), m) == order.end()) {
          order.push_back(m);
        }
      }
      add(std::move(order));
    }
  }
  add(mesh_dims);
  return orders;
}

// The sharding of `slot` in `combination` with the loop dims' nesting orders.
absl::StatusOr<Sharding> SlotSharding(
    absl::Span<const DimStrategy* const> combination, const TensorSlot& slot,
    const std::map<int, std::vector<int64_t>>& orders) {
  std::vector<Placement> placements;
  placements.reserve(combination.size());
  for (const DimStrategy* c : combination) {
    placements.push_back(PlacementIn(*c, slot));
  }
  const int64_t rank = static_cast<int64_t>(slot.loops->size());
  ShardOrder order(rank);
  for (int64_t d = 0; d < rank; ++d) {
    auto it = orders.find((*slot.loops)[d]);
    if (it != orders.end()) order[d] = it->second;
  }
  return Sharding::FromPlacements(placements, rank, order);
}

// Whether every present input is Replicate on mesh dim `m`.
bool InputsReplicateOn(const StrategyContext& ctx, int64_t m) {
  for (const DTensorSpec* input : ctx.inputs) {
    if (input != nullptr && !input->sharding().placement(m).is_replicate()) {
      return false;
    }
  }
  return true;
}

// Whether `c` keeps every input and output Replicate and runs no collective.
bool AllReplicate(const DimStrategy& c) {
  const auto replicate = [](const Placement& p) { return p.is_replicate(); };
  return c.kernel_comms.empty() && absl::c_all_of(c.inputs, replicate) &&
         absl::c_all_of(c.outputs, replicate);
}

// Whether option `c` of mesh dim `m` can be dropped because it never wins:
// `m` has size 1, every input is Replicate on it, `c` makes some input
// something else there, and an all-Replicate option is among `options`.
// Swapping `c` for that option in any strategy gives the same shardings on
// the other mesh dims, so the same plans on the mesh without size-1 dims
// (the planner's search) and the same cost, no more Partial outputs or
// changed inputs, and at least one redistribution step less (the local step
// that gives the input `c`'s placement on `m`): the propagation's tie-breaks
// always prefer it. Leaving such options out keeps a size-1 mesh dim from
// multiplying the strategies each call costs (docs/ops.md).
bool DominatedOnUnitDim(const StrategyContext& ctx, const DimStrategy& c,
                        int64_t m,
                        absl::Span<const DimStrategy* const> options) {
  if (ctx.mesh_shape[m] != 1 || !InputsReplicateOn(ctx, m)) return false;
  bool changes_input = false;
  for (size_t i = 0; i < c.inputs.size() && i < ctx.inputs.size(); ++i) {
    changes_input |= ctx.inputs[i] != nullptr && !c.inputs[i].is_replicate();
  }
  return changes_input && absl::c_any_of(options, [](const DimStrategy* o) {
           return AllReplicate(*o);
         });
}

// The candidates of each mesh dim that can apply (OptionViable) and can win
// (not DominatedOnUnitDim); a ResourceExhausted error when their
// combinations exceed kMaxStrategies.
absl::StatusOr<std::vector<std::vector<const DimStrategy*>>> ViableCandidates(
    const StrategyContext& ctx,
    absl::Span<const std::vector<DimStrategy>> all_candidates) {
  const int64_t mesh_ndim = static_cast<int64_t>(all_candidates.size());
  std::vector<std::vector<const DimStrategy*>> candidates(mesh_ndim);
  int64_t combinations = 1;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    std::vector<const DimStrategy*> viable;
    for (const DimStrategy& c : all_candidates[m]) {
      if (OptionViable(ctx, c, m)) viable.push_back(&c);
    }
    for (const DimStrategy* c : viable) {
      if (!DominatedOnUnitDim(ctx, *c, m, viable)) candidates[m].push_back(c);
    }
    combinations *= static_cast<int64_t>(candidates[m].size());
    if (combinations > kMaxStrategies) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "more than ", kMaxStrategies, " strategy combinations over ",
          mesh_ndim, " mesh dims"));
    }
  }
  return candidates;
}

// The present inputs, then the outputs, as slots.
std::vector<TensorSlot> TensorSlots(const StrategyContext& ctx,
                                    const LoopDims& loops) {
  std::vector<TensorSlot> slots;
  for (size_t i = 0; i < loops.inputs.size(); ++i) {
    if (ctx.inputs[i] == nullptr) continue;
    slots.push_back({&loops.inputs[i], &ctx.inputs[i]->sharding(), true,
                     static_cast<int>(i)});
  }
  for (size_t j = 0; j < loops.outputs.size(); ++j) {
    slots.push_back({&loops.outputs[j], nullptr, false, static_cast<int>(j)});
  }
  return slots;
}

// The strategy of one combination (a candidate per mesh dim) with the loops'
// nesting `orders`.
absl::StatusOr<OpStrategy> StrategyOf(
    absl::Span<const DimStrategy* const> combination,
    absl::Span<const TensorSlot> slots,
    const std::map<int, std::vector<int64_t>>& orders, const LoopDims& loops) {
  OpStrategy strategy;
  strategy.inputs.resize(loops.inputs.size());
  strategy.outputs.resize(loops.outputs.size());
  for (const TensorSlot& slot : slots) {
    DT_ASSIGN_OR_RETURN(Sharding sharding,
                        SlotSharding(combination, slot, orders));
    (slot.is_input ? strategy.inputs[slot.index]
                   : strategy.outputs[slot.index]) = sharding;
  }
  for (int64_t m = 0; m < static_cast<int64_t>(combination.size()); ++m) {
    for (KernelComm comm : combination[m]->kernel_comms) {
      if (comm.mesh_dims.empty()) comm.mesh_dims = {m};
      strategy.kernel_comms.push_back(std::move(comm));
    }
  }
  return strategy;
}

// Appends the strategies of one combination: one per assignment of candidate
// orders to the loops with nested shards.
absl::Status AppendStrategiesOf(
    absl::Span<const DimStrategy* const> combination,
    const std::vector<TensorSlot>& slots, const LoopDims& loops,
    std::vector<OpStrategy>* strategies) {
  DT_ASSIGN_OR_RETURN(LoopMeshDims per_loop,
                      MeshDimsPerLoop(combination, slots));
  std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> options;
  for (const auto& [loop, dims] : per_loop) {
    options.emplace_back(loop, dims.size() > 1
                                   ? CandidateOrders(loop, dims, slots)
                                   : std::vector<std::vector<int64_t>>{dims});
  }
  std::vector<size_t> pick(options.size(), 0);
  while (true) {
    std::map<int, std::vector<int64_t>> orders;
    for (size_t k = 0; k < options.size(); ++k) {
      orders[options[k].first] = options[k].second[pick[k]];
    }
    DT_ASSIGN_OR_RETURN(OpStrategy strategy,
                        StrategyOf(combination, slots, orders, loops));
    strategies->push_back(std::move(strategy));
    size_t k = 0;
    while (k < pick.size() && ++pick[k] == options[k].second.size()) {
      pick[k++] = 0;
    }
    if (k == pick.size()) return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<std::vector<OpStrategy>> CombineMeshDims(
    const StrategyContext& ctx,
    absl::Span<const std::vector<DimStrategy>> all_candidates,
    const LoopDims& loops) {
  DT_ASSIGN_OR_RETURN(
      const std::vector<std::vector<const DimStrategy*>> candidates,
      ViableCandidates(ctx, all_candidates));
  const int64_t mesh_ndim = static_cast<int64_t>(candidates.size());
  int64_t combinations = 1;
  for (const auto& c : candidates) {
    combinations *= static_cast<int64_t>(c.size());
  }
  const std::vector<TensorSlot> slots = TensorSlots(ctx, loops);
  std::vector<OpStrategy> strategies;
  strategies.reserve(combinations);
  std::vector<size_t> choice(mesh_ndim, 0);
  std::vector<const DimStrategy*> combination(mesh_ndim);
  for (int64_t n = 0; n < combinations; ++n) {
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      combination[m] = candidates[m][choice[m]];
    }
    DT_RETURN_IF_ERROR(
        AppendStrategiesOf(combination, slots, loops, &strategies));
    // Next combination, the last mesh dim fastest.
    for (int64_t m = mesh_ndim - 1; m >= 0; --m) {
      if (++choice[m] < candidates[m].size()) break;
      choice[m] = 0;
    }
  }
  return strategies;
}

}  // namespace dtensor
