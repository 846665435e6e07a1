#ifndef DTENSOR_DTENSOR_REDISTRIBUTE_UNIT_MESH_DIMS_H_
#define DTENSOR_DTENSOR_REDISTRIBUTE_UNIT_MESH_DIMS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/plan.h"
#include "dtensor/sharding.h"

namespace dtensor {

// A mesh with its size-1 dims left out, for planning. A size-1 mesh dim never
// needs a collective: its one rank holds the whole of its "chunk", so Shard
// on it is the same data as Replicate, and a Partial over one rank is already
// the value. The planner searches the mesh without them (its states and
// moves no longer multiply by their placements) and lifts the plan back.
class MeshWithoutUnitDims {
 public:
  // Requires: cost_model.mesh_ndim() == mesh_shape.size().
  MeshWithoutUnitDims(absl::Span<const int64_t> mesh_shape,
                      const CostModel& cost_model);

  // Whether some mesh dim has size 1 (else there is nothing to leave out).
  bool has_unit_dims() const { return kept_.size() < mesh_ndim_; }
  // The sizes of the kept mesh dims, in order.
  const std::vector<int64_t>& shape() const { return shape_; }
  // The cost model of the kept mesh dims' links.
  const CostModel& cost_model() const { return cost_model_; }

  // `sharding` on the kept mesh dims (same blocks: the unit dims split
  // nothing and a Partial over one rank is the value).
  Sharding Drop(const Sharding& sharding) const;
  // A plan from `from` to `to` on the whole mesh made of `plan`, a plan from
  // Drop(from) to Drop(to): its steps on the whole mesh, with the unit dims
  // Replicate, between local steps (the planner's moves over groups of one
  // rank, which cost nothing) that make the unit dims Replicate and then
  // give them `to`'s placements.
  RedistributePlan Lift(const RedistributePlan& plan, const Sharding& from,
                        const Sharding& to) const;

 private:
  // `sharding` of the kept mesh dims on the whole mesh, the unit dims
  // Replicate.
  Sharding LiftSharding(const Sharding& sharding) const;
  // A local step from `before` to `after` over `mesh_dims`.
  RedistributeStep UnitStep(const Sharding& before, const Sharding& after,
                            absl::Span<const int64_t> mesh_dims) const;
  // Appends to `plan` the local steps from `at` to the sharding that differs
  // from it only on the unit dims, where it has `to`'s placements (an
  // all-reduce of each Partial, a permute of no data, Replicate -> Partial
  // for each Partial of `to`), and leaves `at` there.
  void AppendUnitSteps(const Sharding& to, Sharding& at,
                       RedistributePlan& plan) const;
  bool IsKept(size_t m) const { return unit_[m] == 0; }

  size_t mesh_ndim_;
  // The whole mesh's index of each kept mesh dim, ascending.
  std::vector<int64_t> kept_;
  // 1 for a size-1 mesh dim, per mesh dim.
  std::vector<char> unit_;
  std::vector<int64_t> shape_;
  CostModel cost_model_;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_REDISTRIBUTE_UNIT_MESH_DIMS_H_
