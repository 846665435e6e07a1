#include "dtensor/redistribute/unit_mesh_dims.h"

#include <utility>

namespace dtensor {
namespace {

// The links of the mesh dims `kept`.
CostModel KeptCostModel(const CostModel& cost_model,
                        absl::Span<const int64_t> kept) {
  std::vector<MeshDimLink> links;
  for (int64_t m : kept) links.push_back(cost_model.links()[m]);
  // The links were valid in `cost_model`, so Create cannot fail.
  return *CostModel::Create(std::move(links), cost_model.launch_us());
}

// A sharding of a tensor of `tensor_rank` over `mesh_ndim` mesh dims whose
// mesh dim `index[m]` has the placement of mesh dim m of `sharding` (the
// others Replicate), with the same nesting orders. `index` is increasing.
Sharding Renumbered(const Sharding& sharding, absl::Span<const int64_t> index,
                    int64_t mesh_ndim, bool from_whole) {
  std::vector<Placement> placements(mesh_ndim);
  ShardOrder order(sharding.tensor_rank());
  // from_whole: `sharding` is on the whole mesh and index[k] names the whole
  // mesh dim that becomes dim k; else dim k of `sharding` becomes index[k].
  std::vector<int64_t> to_new(from_whole ? sharding.mesh_ndim() : 0, -1);
  for (size_t k = 0; k < index.size(); ++k) {
    const int64_t source = from_whole ? index[k] : static_cast<int64_t>(k);
    const int64_t target = from_whole ? static_cast<int64_t>(k) : index[k];
    placements[target] = sharding.placement(source);
    if (from_whole) to_new[source] = target;
  }
  for (int64_t d = 0; d < sharding.tensor_rank(); ++d) {
    for (int64_t m : sharding.MeshDimsSharding(d)) {
      const int64_t target = from_whole ? to_new[m] : index[m];
      if (target >= 0) order[d].push_back(target);
    }
  }
  // Valid by construction: each kept shard keeps its tensor dim and its
  // relative nesting position.
  return *Sharding::FromPlacements(placements, sharding.tensor_rank(), order);
}

}  // namespace

MeshWithoutUnitDims::MeshWithoutUnitDims(absl::Span<const int64_t> mesh_shape,
                                         const CostModel& cost_model)
    : mesh_ndim_(mesh_shape.size()), cost_model_(0) {
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    unit_.push_back(mesh_shape[m] == 1);
    if (mesh_shape[m] == 1) continue;
    kept_.push_back(static_cast<int64_t>(m));
    shape_.push_back(mesh_shape[m]);
  }
  cost_model_ = KeptCostModel(cost_model, kept_);
}

Sharding MeshWithoutUnitDims::Drop(const Sharding& sharding) const {
  return Renumbered(sharding, kept_, static_cast<int64_t>(kept_.size()),
                    /*from_whole=*/true);
}

Sharding MeshWithoutUnitDims::LiftSharding(const Sharding& sharding) const {
  return Renumbered(sharding, kept_, static_cast<int64_t>(mesh_ndim_),
                    /*from_whole=*/false);
}

RedistributeStep MeshWithoutUnitDims::UnitStep(
    const Sharding& before, const Sharding& after,
    absl::Span<const int64_t> mesh_dims) const {
  RedistributeStep step;
  step.kind = CommKind::kLocal;
  step.mesh_dims.assign(mesh_dims.begin(), mesh_dims.end());
  step.before = before;
  step.after = after;
  return step;
}

void MeshWithoutUnitDims::AppendUnitSteps(const Sharding& to, Sharding& at,
                                          RedistributePlan& plan) const {
  // Partials over one rank are reduced (an all-reduce over one rank) before,
  // and made (Replicate -> Partial) after, a permute that moves no data: the
  // shards of size-1 mesh dims split nothing, so the blocks are the same.
  for (size_t m = 0; m < mesh_ndim_; ++m) {
    const int64_t unit[] = {static_cast<int64_t>(m)};
    if (at.placement(m).is_partial() && !IsKept(m)) {
      Sharding next = at.WithReplicated(unit);
      plan.steps.push_back(UnitStep(at, next, unit));
      at = std::move(next);
    }
  }
  std::vector<int64_t> unit_partials;
  for (size_t m = 0; m < mesh_ndim_; ++m) {
    if (to.placement(m).is_partial() && !IsKept(m)) {
      unit_partials.push_back(static_cast<int64_t>(m));
    }
  }
  const Sharding permuted = to.WithReplicated(unit_partials);
  if (at != permuted) plan.steps.push_back(UnitStep(at, permuted, {}));
  at = permuted;
  for (int64_t m : unit_partials) {
    const int64_t unit[] = {m};
    Sharding next = at.WithPartial(m, to.placement(m).reduce_op());
    plan.steps.push_back(UnitStep(at, next, unit));
    at = std::move(next);
  }
}

RedistributePlan MeshWithoutUnitDims::Lift(const RedistributePlan& plan,
                                           const Sharding& from,
                                           const Sharding& to) const {
  RedistributePlan lifted;
  lifted.total_cost_us = plan.total_cost_us;
  Sharding at = from;
  if (!plan.steps.empty()) {
    AppendUnitSteps(LiftSharding(plan.steps.front().before), at, lifted);
  }
  for (const RedistributeStep& step : plan.steps) {
    RedistributeStep whole = step;
    for (int64_t& m : whole.mesh_dims) m = kept_[m];
    whole.before = LiftSharding(step.before);
    whole.after = LiftSharding(step.after);
    at = whole.after;
    lifted.steps.push_back(std::move(whole));
  }
  AppendUnitSteps(to, at, lifted);
  return lifted;
}

}  // namespace dtensor
