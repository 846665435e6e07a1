#include "dtensor/redistribute/planner_moves.h"

#include <algorithm>

namespace dtensor {
namespace {

// Whether every permute from a sharding costs the same, whatever mesh dims it
// crosses: all links equal.
bool UniformPermuteCosts(absl::Span<const int64_t> mesh_shape,
                         const CostModel& cost_model) {
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    const MeshDimLink& link = cost_model.links()[m];
    const MeshDimLink& first = cost_model.links()[0];
    if (link.bandwidth_gbps != first.bandwidth_gbps ||
        link.hop_latency_us != first.hop_latency_us) {
      return false;
    }
  }
  return true;
}

}  // namespace

PlannerMoves::PlannerMoves(PackedSharding to,
                           absl::Span<const int64_t> mesh_shape,
                           absl::Span<const int64_t> global_shape, DType dtype,
                           const CostModel& cost_model)
    : shapes_(mesh_shape, global_shape),
      dtype_(dtype),
      cost_model_(cost_model),
      to_(to),
      uniform_permute_costs_(UniformPermuteCosts(mesh_shape, cost_model)),
      permute_classes_(mesh_shape, global_shape) {}

double PlannerMoves::LocalBytes(const ShardOrders& orders) const {
  // As PaddedLocalBytes, on the decoded sharding.
  double elements = 1;
  for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
    int64_t extent = shapes_.global_shape[d];
    for (int64_t m : orders.of(d)) {
      extent = (extent + shapes_.mesh_shape[m] - 1) / shapes_.mesh_shape[m];
    }
    elements *= static_cast<double>(extent);
  }
  return elements * static_cast<double>(ElementSize(dtype_));
}

void PlannerMoves::GatherMoves(PackedSharding state, const ShardOrders& orders,
                               Visitor visit) const {
  for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
    const absl::Span<const int64_t> order = orders.of(d);
    for (size_t start = 0; start < order.size(); ++start) {
      const absl::Span<const int64_t> suffix = order.subspan(start);
      visit(state.WithReplicated(suffix),
            MakeStep(CommKind::kAllGather, suffix), suffix, {d});
    }
  }
}

void PlannerMoves::AllToAllMoves(PackedSharding state,
                                 const ShardOrders& orders,
                                 Visitor visit) const {
  for (int64_t from = 0; from < shapes_.tensor_rank; ++from) {
    const absl::Span<const int64_t> order = orders.of(from);
    for (size_t start = 0; start < order.size(); ++start) {
      const absl::Span<const int64_t> suffix = order.subspan(start);
      const PackedSharding gathered = state.WithReplicated(suffix);
      const Step step = MakeStep(CommKind::kAllToAll, suffix);
      for (int64_t to = 0; to < shapes_.tensor_rank; ++to) {
        if (to == from) continue;
        // The moved mesh dims may land in any order: the same exchange.
        MeshDimList landing(suffix.begin(), suffix.end());
        std::sort(landing.begin(), landing.end());
        do {
          visit(gathered.WithShardsAppended(landing, to, orders.count(to)),
                step, suffix, {from, to});
        } while (std::next_permutation(landing.begin(), landing.end()));
      }
    }
  }
}

void PlannerMoves::PartialMoves(PackedSharding state, const ShardOrders& orders,
                                Visitor visit) const {
  for (int op = 0; op < 4; ++op) {
    MeshDimList same_op;
    for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
      if (state.code(m) ==
          PackedSharding::PartialCode(static_cast<ReduceOp>(op))) {
        same_op.push_back(m);
      }
    }
    // Every non-empty subset, in every order.
    const int n = static_cast<int>(same_op.size());
    for (int mask = 1; mask < (1 << n); ++mask) {
      MeshDimList group;
      for (int i = 0; i < n; ++i) {
        if (mask & (1 << i)) group.push_back(same_op[i]);
      }
      const PackedSharding reduced = state.WithReplicated(group);
      // All-reduce: any one ordering of the group will do.
      visit(reduced, MakeStep(CommKind::kAllReduce, group), group, {});
      const Step reduce_scatter = MakeStep(CommKind::kReduceScatter, group);
      do {
        for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
          visit(reduced.WithShardsAppended(group, d, orders.count(d)),
                reduce_scatter, group, {d});
        }
      } while (std::next_permutation(group.begin(), group.end()));
    }
  }
}

void PlannerMoves::LocalMoves(PackedSharding state, const ShardOrders& orders,
                              Visitor visit) const {
  for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
    if (!state.is_replicate(m)) continue;
    const int64_t slice[] = {m};
    const Step local = {CommKind::kLocal, 0};
    for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
      visit(state.WithShardsAppended(slice, d, orders.count(d)), local, slice,
            {d});
    }
    // Replicate -> Partial, so that one reduction collective can cover
    // this mesh dim too: with the target's op here, or with an op some
    // Partial mesh dim already has (sum by default).
    for (ReduceOp op : partial_ops_) {
      visit(state.WithCode(m, PackedSharding::PartialCode(op)), local, slice,
            {});
    }
  }
}

MeshDimList PlannerMoves::MovedMeshDims(PackedSharding from,
                                        PackedSharding to) const {
  // A mesh dim keeps its coordinate's meaning when it splits the same tensor
  // dim at the same depth; ranks then exchange only along the others.
  MeshDimList moved;
  for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
    if (from.is_partial(m)) continue;
    if (from.code(m) != to.code(m)) moved.push_back(m);
  }
  return moved;
}

void PlannerMoves::PermuteMoves(PackedSharding state, double cost,
                                const ShardOrders& orders, Visitor visit) {
  // On uniform links, a permute's cost depends only on the bytes held before
  // it: once a member of a class has been expanded, a later one with no
  // lower cost and no fewer bytes would improve nothing.
  PermuteClass& members = permute_classes_.Of(state, orders);
  if (uniform_permute_costs_) {
    for (const auto& [done_cost, done_bytes] : members.expanded) {
      if (done_cost <= cost && done_bytes <= local_bytes_) return;
    }
    members.expanded.emplace_back(cost, local_bytes_);
  }
  for (PackedSharding member : members.states) {
    if (member == state ||
        (members.uneven && !permute_classes_.HoldsSameBlocks(orders, member))) {
      continue;
    }
    const MeshDimList moved = MovedMeshDims(state, member);
    visit(member, MakeStep(CommKind::kPermute, moved), moved, {});
  }
}

void PlannerMoves::ForEachNeighbor(PackedSharding state, double cost,
                                   Visitor visit) {
  partial_ops_ = {ReduceOp::kSum};
  for (PackedSharding packed : {state, to_}) {
    for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
      if (packed.is_partial(m) &&
          std::find(partial_ops_.begin(), partial_ops_.end(),
                    packed.reduce_op(m)) == partial_ops_.end()) {
        partial_ops_.push_back(packed.reduce_op(m));
      }
    }
  }
  const ShardOrders orders(state, shapes_.mesh_ndim, shapes_.tensor_rank);
  local_bytes_ = LocalBytes(orders);
  GatherMoves(state, orders, visit);
  AllToAllMoves(state, orders, visit);
  PartialMoves(state, orders, visit);
  LocalMoves(state, orders, visit);
  PermuteMoves(state, cost, orders, visit);
}

}  // namespace dtensor
