#ifndef DTENSOR_DTENSOR_PLANNER_MOVES_H_
#define DTENSOR_DTENSOR_PLANNER_MOVES_H_

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/packed_sharding.h"
#include "dtensor/redistribute/planner_permute_classes.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {

// The moves of the redistribution planner: the shardings one step from a packed
// sharding (the steps PlanRedistribution lists), with each step's kind and cost
// under the cost model, for one tensor, mesh and target sharding.
class PlannerMoves {
 public:
  // A step's kind and cost.
  struct Step {
    CommKind kind;
    double cost_us;
  };
  // Receives the sharding `next` one `step` away, over `mesh_dims`, moving
  // shards of `tensor_dims` (views valid during the call only).
  using Visitor = absl::FunctionRef<void(
      PackedSharding next, Step step, absl::Span<const int64_t> mesh_dims,
      absl::Span<const int64_t> tensor_dims)>;

  // Requires: the shapes and the cost model outlive this object; no mesh
  // dim has size 1 (PlanRedistribution plans without them,
  // dtensor/redistribute/unit_mesh_dims.h).
  PlannerMoves(PackedSharding to, absl::Span<const int64_t> mesh_shape,
               absl::Span<const int64_t> global_shape, DType dtype,
               const CostModel& cost_model);

  // Visits the moves from `state`, reached at `cost`, in a fixed order (the
  // search breaks ties by it). On uniform links, the permutes are left out when
  // an earlier call from the same permute class had no higher cost and no more
  // local bytes (they would improve nothing): call it once per state, as the
  // search settles it.
  void ForEachNeighbor(PackedSharding state, double cost, Visitor visit);

 private:
  void GatherMoves(PackedSharding state, const ShardOrders& orders,
                   Visitor visit) const;
  void AllToAllMoves(PackedSharding state, const ShardOrders& orders,
                     Visitor visit) const;
  void PartialMoves(PackedSharding state, const ShardOrders& orders,
                    Visitor visit) const;
  void LocalMoves(PackedSharding state, const ShardOrders& orders,
                  Visitor visit) const;
  void PermuteMoves(PackedSharding state, double cost,
                    const ShardOrders& orders, Visitor visit);
  // A `kind` step over `mesh_dims` from the state being expanded: local when
  // the group has one rank (it moves nothing). The moves compute it once for
  // all the shardings the same collective can reach.
  Step MakeStep(CommKind kind, absl::Span<const int64_t> mesh_dims) const {
    if (kind != CommKind::kLocal &&
        GroupSize(mesh_dims, shapes_.mesh_shape) == 1) {
      kind = CommKind::kLocal;
    }
    return {kind, cost_model_.StepCostUs(kind, mesh_dims, shapes_.mesh_shape,
                                         local_bytes_)};
  }
  // The mesh dims along which a permute from `from` to `to` moves data.
  MeshDimList MovedMeshDims(PackedSharding from, PackedSharding to) const;
  // Padded local bytes of a sharding with shard orders `orders`.
  double LocalBytes(const ShardOrders& orders) const;

  const PlanShapes shapes_;
  DType dtype_;
  const CostModel& cost_model_;
  const PackedSharding to_;
  // Whether every permute from a sharding costs the same.
  const bool uniform_permute_costs_;
  PermuteClasses permute_classes_;
  // The ops Replicate -> Partial may introduce at the state being expanded.
  absl::InlinedVector<ReduceOp, 4> partial_ops_;
  // Padded local bytes of the state being expanded.
  double local_bytes_ = 0;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_PLANNER_MOVES_H_
