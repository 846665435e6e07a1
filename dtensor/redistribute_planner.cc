#include "dtensor/redistribute_planner.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace {

using MeshDims = MeshDimList;

// All orderings of every non-empty subset of `items`, each ordering once.
std::vector<MeshDims> OrderedSubsets(const MeshDims& items) {
  std::vector<MeshDims> result;
  const int n = static_cast<int>(items.size());
  for (int mask = 1; mask < (1 << n); ++mask) {
    MeshDims subset;
    for (int i = 0; i < n; ++i) {
      if (mask & (1 << i)) subset.push_back(items[i]);
    }
    do {
      result.push_back(subset);
    } while (std::next_permutation(subset.begin(), subset.end()));
  }
  return result;
}

// For each non-empty suffix of `order` (innermost mesh dims), the suffix.
std::vector<MeshDims> Suffixes(const MeshDims& order) {
  std::vector<MeshDims> result;
  for (size_t start = 0; start < order.size(); ++start) {
    result.emplace_back(order.begin() + start, order.end());
  }
  return result;
}

// The Partial mesh dims of `sharding`, grouped by op.
std::vector<MeshDims> PartialDimsByOp(const Sharding& sharding) {
  std::vector<MeshDims> by_op(4);
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    const Placement& p = sharding.placement(m);
    if (p.is_partial()) by_op[static_cast<int>(p.reduce_op())].push_back(m);
  }
  by_op.erase(std::remove_if(by_op.begin(), by_op.end(),
                             [](const MeshDims& dims) { return dims.empty(); }),
              by_op.end());
  return by_op;
}

// The cheapest conceivable collective: one launch and one hop over the
// fastest mesh dim of size > 1 (0 when every mesh dim has size 1).
double MinCollectiveUs(absl::Span<const int64_t> mesh_shape,
                       const CostModel& cost_model) {
  double min_us = 0;
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    if (mesh_shape[m] == 1) continue;
    const double us =
        cost_model.launch_us() + cost_model.links()[m].hop_latency_us;
    if (min_us == 0 || us < min_us) min_us = us;
  }
  return min_us;
}

// Whether every permute from a layout costs the same, whatever mesh dims it
// crosses: all links equal and no mesh dim of size 1 (a permute that crosses
// only those is free).
bool UniformPermuteCosts(absl::Span<const int64_t> mesh_shape,
                         const CostModel& cost_model) {
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    const MeshDimLink& link = cost_model.links()[m];
    const MeshDimLink& first = cost_model.links()[0];
    if (mesh_shape[m] == 1 || link.bandwidth_gbps != first.bandwidth_gbps ||
        link.hop_latency_us != first.hop_latency_us) {
      return false;
    }
  }
  return true;
}

// A* over layouts. States are Shardings; edges are the steps listed in
// the header; the first time the target is settled its path is optimal.
class PlanSearch {
 public:
  PlanSearch(const Sharding& to, absl::Span<const int64_t> mesh_shape,
             absl::Span<const int64_t> global_shape, DType dtype,
             const CostModel& cost_model)
      : to_(to),
        mesh_shape_(mesh_shape),
        global_shape_(global_shape),
        dtype_(dtype),
        cost_model_(cost_model),
        min_collective_us_(MinCollectiveUs(mesh_shape, cost_model)),
        uniform_permute_costs_(UniformPermuteCosts(mesh_shape, cost_model)) {}

  RedistributePlan Run(const Sharding& from);

 private:
  struct Node {
    Sharding state;
    double cost = 0;
    int steps = 0;
    int parent = -1;
    bool settled = false;
    // The step into this node.
    CommKind kind = CommKind::kLocal;
    MeshDims mesh_dims;
    MeshDims tensor_dims;
    double step_bytes = 0;
    double step_cost = 0;
  };
  // (cost + heuristic, steps, node, cost): ties go to fewer steps, then to
  // the earlier node.
  using QueueEntry = std::tuple<double, int, int, double>;

  void Expand(int node);
  void ExpandGathers(int node);
  void ExpandAllToAlls(int node);
  void ExpandPartials(int node);
  void ExpandLocal(int node);
  void ExpandPermutes(int node);
  // The layouts a permute can reach from one another: same Partial mesh
  // dims, every tensor dim split into as many blocks.
  struct PermuteClass {
    std::vector<Sharding> layouts;
    // (cost, local bytes) of the members whose permutes were expanded.
    std::vector<std::pair<double, double>> expanded;
  };
  // The mesh dims along which a permute from `from` to `to` moves data.
  MeshDims MovedMeshDims(const Sharding& from, const Sharding& to) const;
  // The class of `state`, made on first use and cached by PermuteClassKey.
  PermuteClass& PermuteClassOf(const Sharding& state);
  std::vector<int64_t> PermuteClassKey(const Sharding& state) const;
  // Appends `layout` with the mesh dims `by_dim[e]` sharding tensor dim e,
  // for e >= d, in every nesting order.
  void AddOrders(const std::vector<MeshDims>& by_dim, int64_t d,
                 const Sharding& layout, std::vector<Sharding>* members) const;
  // Offers `next`, reached from `node` by a `kind` step.
  void Relax(int node, const Sharding& next, CommKind kind, MeshDims mesh_dims,
             MeshDims tensor_dims);
  // Whether a permute from `from` to `to` can deliver every block `to` needs
  // (see the definition).
  bool HoldsSameBlocks(const Sharding& from, const Sharding& to) const;
  int64_t GroupSize(const MeshDims& mesh_dims) const;
  // A lower bound on the cost from `state` to the target (A*): the cheapest
  // possible collective for each of "a Partial must be reduced" and "a shard
  // must move". Consistent, so the first time the target is settled its path
  // is optimal.
  double Heuristic(const Sharding& state) const;

  const Sharding& to_;
  absl::Span<const int64_t> mesh_shape_;
  absl::Span<const int64_t> global_shape_;
  DType dtype_;
  const CostModel& cost_model_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<Sharding, int> index_;
  absl::flat_hash_map<std::vector<int64_t>, PermuteClass> permute_classes_;
  // The cheapest conceivable collective (the A* bound's unit).
  const double min_collective_us_;
  // Whether every permute from a layout costs the same.
  const bool uniform_permute_costs_;
  // The ops Replicate -> Partial may introduce at the node being expanded.
  std::vector<ReduceOp> partial_ops_;
  // Padded local bytes of the node being expanded.
  double local_bytes_ = 0;
  std::priority_queue<QueueEntry, std::vector<QueueEntry>,
                      std::greater<QueueEntry>>
      queue_;
};

double PlanSearch::Heuristic(const Sharding& state) const {
  if (min_collective_us_ == 0) return 0;
  // Mesh dims of size 1 never need a collective: ignore them. Only an
  // all-reduce or a reduce-scatter removes a Partial the target lacks, and
  // neither moves a shard that local slices (which only append) cannot
  // extend into the target's: each need costs at least one collective.
  bool needs_reduction = false;
  bool needs_move = false;
  for (int64_t m = 0; m < state.mesh_ndim(); ++m) {
    const Placement& from = state.placement(m);
    if (mesh_shape_[m] == 1 || from.is_replicate() ||
        from == to_.placement(m)) {
      continue;
    }
    (from.is_partial() ? needs_reduction : needs_move) = true;
  }
  for (int64_t d = 0; d < state.tensor_rank() && !needs_move; ++d) {
    const MeshDims have = state.MeshDimsSharding(d);
    const MeshDims want = to_.MeshDimsSharding(d);
    size_t j = 0;
    for (int64_t m : have) {
      if (mesh_shape_[m] == 1) continue;
      while (j < want.size() && mesh_shape_[want[j]] == 1) ++j;
      if (j == want.size() || want[j] != m) {
        needs_move = true;
        break;
      }
      ++j;
    }
  }
  return (needs_reduction + needs_move) * min_collective_us_;
}

int64_t PlanSearch::GroupSize(const MeshDims& mesh_dims) const {
  int64_t size = 1;
  for (int64_t m : mesh_dims) size *= mesh_shape_[m];
  return size;
}

void PlanSearch::Relax(int node, const Sharding& next, CommKind kind,
                       MeshDims mesh_dims, MeshDims tensor_dims) {
  if (kind != CommKind::kLocal && GroupSize(mesh_dims) == 1) {
    kind = CommKind::kLocal;  // A group of one rank moves nothing.
  }
  const double local_bytes =
      PaddedLocalBytes(nodes_[node].state, mesh_shape_, global_shape_, dtype_);
  const double step_cost =
      cost_model_.StepCostUs(kind, mesh_dims, mesh_shape_, local_bytes);
  const double cost = nodes_[node].cost + step_cost;
  const int steps = nodes_[node].steps + 1;
  auto [it, inserted] =
      index_.try_emplace(next, static_cast<int>(nodes_.size()));
  if (inserted) {
    nodes_.push_back(Node{next});
  } else {
    const Node& existing = nodes_[it->second];
    if (existing.settled || std::make_pair(existing.cost, existing.steps) <=
                                std::make_pair(cost, steps)) {
      return;
    }
  }
  Node& target = nodes_[it->second];
  target.cost = cost;
  target.steps = steps;
  target.parent = node;
  target.kind = kind;
  target.step_bytes =
      CostModel::ReceivedBytes(kind, GroupSize(mesh_dims), local_bytes);
  target.step_cost = step_cost;
  target.mesh_dims = std::move(mesh_dims);
  target.tensor_dims = std::move(tensor_dims);
  queue_.emplace(cost + Heuristic(next), steps, it->second, cost);
}

void PlanSearch::ExpandGathers(int node) {
  const Sharding state = nodes_[node].state;
  for (int64_t d = 0; d < state.tensor_rank(); ++d) {
    for (const MeshDims& suffix : Suffixes(state.MeshDimsSharding(d))) {
      Relax(node, state.WithReplicated(suffix), CommKind::kAllGather, suffix,
            {d});
    }
  }
}

void PlanSearch::ExpandAllToAlls(int node) {
  const Sharding state = nodes_[node].state;
  for (int64_t from = 0; from < state.tensor_rank(); ++from) {
    for (const MeshDims& suffix : Suffixes(state.MeshDimsSharding(from))) {
      const Sharding gathered = state.WithReplicated(suffix);
      for (int64_t to = 0; to < state.tensor_rank(); ++to) {
        if (to == from) continue;
        // The moved mesh dims may land in any order: the same exchange.
        MeshDims landing = suffix;
        std::sort(landing.begin(), landing.end());
        do {
          Relax(node, gathered.WithShardsAppended(landing, to),
                CommKind::kAllToAll, suffix, {from, to});
        } while (std::next_permutation(landing.begin(), landing.end()));
      }
    }
  }
}

void PlanSearch::ExpandPartials(int node) {
  const Sharding state = nodes_[node].state;
  for (const MeshDims& same_op : PartialDimsByOp(state)) {
    for (const MeshDims& group : OrderedSubsets(same_op)) {
      const Sharding reduced = state.WithReplicated(group);
      // All-reduce: any one ordering of the group will do.
      if (std::is_sorted(group.begin(), group.end())) {
        Relax(node, reduced, CommKind::kAllReduce, group, {});
      }
      for (int64_t d = 0; d < state.tensor_rank(); ++d) {
        Relax(node, reduced.WithShardsAppended(group, d),
              CommKind::kReduceScatter, group, {d});
      }
    }
  }
}

void PlanSearch::ExpandLocal(int node) {
  const Sharding state = nodes_[node].state;
  for (int64_t m = 0; m < state.mesh_ndim(); ++m) {
    if (!state.placement(m).is_replicate()) continue;
    for (int64_t d = 0; d < state.tensor_rank(); ++d) {
      Relax(node, state.WithShardsAppended({m}, d), CommKind::kLocal, {m}, {d});
    }
    // Replicate -> Partial, so that one reduction collective can cover
    // this mesh dim too: with the target's op here, or with an op some
    // Partial mesh dim already has (sum by default).
    for (ReduceOp op : partial_ops_) {
      Relax(node, state.WithPartial(m, op), CommKind::kLocal, {m}, {});
    }
  }
}

// The non-empty ranges [offset, offset + size) into which `mesh_dims`
// (outermost first) chunk an extent, one per combination of their coordinates,
// sorted.
std::vector<std::pair<int64_t, int64_t>> NonEmptyChunks(
    int64_t extent, const MeshDims& mesh_dims,
    absl::Span<const int64_t> mesh_shape) {
  std::vector<std::pair<int64_t, int64_t>> ranges = {{0, extent}};
  for (int64_t m : mesh_dims) {
    std::vector<std::pair<int64_t, int64_t>> split;
    for (const auto& [offset, size] : ranges) {
      for (int64_t i = 0; i < mesh_shape[m]; ++i) {
        const ChunkRange chunk = ChunkOf(size, mesh_shape[m], i);
        split.emplace_back(offset + chunk.offset, chunk.size);
      }
    }
    ranges = std::move(split);
  }
  ranges.erase(std::remove_if(ranges.begin(), ranges.end(),
                              [](const auto& r) { return r.second == 0; }),
               ranges.end());
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

bool PlanSearch::HoldsSameBlocks(const Sharding& from,
                                 const Sharding& to) const {
  // Both layouts split every tensor dim into as many blocks, with disjoint
  // mesh dims per tensor dim, so every combination of per-dim blocks is held
  // by equally many ranks at every Partial coordinate. A permute can deliver
  // every non-empty block `to` needs when, per tensor dim, its non-empty
  // ranges are among those of `from`.
  for (int64_t d = 0; d < from.tensor_rank(); ++d) {
    const MeshDims to_dims = to.MeshDimsSharding(d);
    int64_t parts = 1;
    for (int64_t m : to_dims) parts *= mesh_shape_[m];
    if (global_shape_[d] % parts == 0) continue;  // Same equal blocks.
    const auto needed = NonEmptyChunks(global_shape_[d], to_dims, mesh_shape_);
    const auto held =
        NonEmptyChunks(global_shape_[d], from.MeshDimsSharding(d), mesh_shape_);
    if (!std::includes(held.begin(), held.end(), needed.begin(),
                       needed.end())) {
      return false;
    }
  }
  return true;
}

std::vector<int64_t> PlanSearch::PermuteClassKey(const Sharding& state) const {
  std::vector<int64_t> key;
  key.reserve(state.mesh_ndim() + state.tensor_rank());
  for (int64_t m = 0; m < state.mesh_ndim(); ++m) {
    const Placement& p = state.placement(m);
    key.push_back(p.is_partial() ? 1 + static_cast<int64_t>(p.reduce_op()) : 0);
  }
  for (int64_t d = 0; d < state.tensor_rank(); ++d) {
    int64_t parts = 1;
    for (int64_t m : state.MeshDimsSharding(d)) parts *= mesh_shape_[m];
    key.push_back(parts);
  }
  return key;
}

void PlanSearch::AddOrders(const std::vector<MeshDims>& by_dim, int64_t d,
                           const Sharding& layout,
                           std::vector<Sharding>* members) const {
  if (d == static_cast<int64_t>(by_dim.size())) {
    members->push_back(layout);
    return;
  }
  MeshDims dims = by_dim[d];
  do {
    AddOrders(by_dim, d + 1, layout.WithShardsAppended(dims, d), members);
  } while (std::next_permutation(dims.begin(), dims.end()));
}

PlanSearch::PermuteClass& PlanSearch::PermuteClassOf(const Sharding& state) {
  std::vector<int64_t> key = PermuteClassKey(state);
  auto [it, inserted] = permute_classes_.try_emplace(key);
  PermuteClass& members = it->second;
  if (!inserted) return members;
  // Every assignment of the non-Partial mesh dims to a tensor dim or to
  // Replicate (-1) that splits each tensor dim into as many blocks as
  // `state`, in every nesting order.
  MeshDims free_dims;
  for (int64_t m = 0; m < state.mesh_ndim(); ++m) {
    if (!state.placement(m).is_partial()) free_dims.push_back(m);
  }
  const Sharding cleared = state.WithReplicated(free_dims);
  const int64_t rank = state.tensor_rank();
  std::vector<int64_t> assignment(free_dims.size(), -1);
  while (true) {
    std::vector<MeshDims> by_dim(rank);
    std::vector<int64_t> parts(rank, 1);
    for (size_t j = 0; j < free_dims.size(); ++j) {
      if (assignment[j] < 0) continue;
      by_dim[assignment[j]].push_back(free_dims[j]);
      parts[assignment[j]] *= mesh_shape_[free_dims[j]];
    }
    if (std::equal(parts.begin(), parts.end(),
                   key.begin() + state.mesh_ndim())) {
      AddOrders(by_dim, 0, cleared, &members.layouts);
    }
    // Next assignment, as a counter in base rank + 1.
    size_t j = 0;
    while (j < assignment.size() && assignment[j] == rank - 1) {
      assignment[j++] = -1;
    }
    if (j == assignment.size()) break;
    ++assignment[j];
  }
  return members;
}

MeshDims PlanSearch::MovedMeshDims(const Sharding& from,
                                   const Sharding& to) const {
  // A mesh dim keeps its coordinate's meaning when it splits the same tensor
  // dim at the same depth, not counting mesh dims of size 1 (their chunk is
  // everything); ranks then exchange only along the others.
  auto depth = [&](const Sharding& layout, int64_t m) {
    int64_t count = 0;
    for (int64_t other : layout.MeshDimsSharding(layout.placement(m).dim())) {
      if (other == m) break;
      if (mesh_shape_[other] > 1) ++count;
    }
    return count;
  };
  MeshDims moved;
  for (int64_t m = 0; m < from.mesh_ndim(); ++m) {
    const Placement& a = from.placement(m);
    const Placement& b = to.placement(m);
    if (mesh_shape_[m] == 1 || a.is_partial()) continue;
    if (a != b || (a.is_shard() && depth(from, m) != depth(to, m))) {
      moved.push_back(m);
    }
  }
  return moved;
}

void PlanSearch::ExpandPermutes(int node) {
  const Sharding state = nodes_[node].state;
  // On uniform links with no mesh dim of size 1, a permute's cost depends
  // only on the bytes held before it: once a member of a class has been
  // expanded, a later one with no lower cost and no fewer bytes would
  // improve nothing.
  PermuteClass& members = PermuteClassOf(state);
  const double cost = nodes_[node].cost;
  if (uniform_permute_costs_) {
    for (const auto& [done_cost, done_bytes] : members.expanded) {
      if (done_cost <= cost && done_bytes <= local_bytes_) return;
    }
    members.expanded.emplace_back(cost, local_bytes_);
  }
  for (const Sharding& member : members.layouts) {
    if (member != state && HoldsSameBlocks(state, member)) {
      Relax(node, member, CommKind::kPermute, MovedMeshDims(state, member), {});
    }
  }
}

void PlanSearch::Expand(int node) {
  partial_ops_ = {ReduceOp::kSum};
  const Sharding& state = nodes_[node].state;
  for (const Sharding* layout : {&state, &to_}) {
    for (int64_t m = 0; m < layout->mesh_ndim(); ++m) {
      const Placement& p = layout->placement(m);
      if (p.is_partial() && std::find(partial_ops_.begin(), partial_ops_.end(),
                                      p.reduce_op()) == partial_ops_.end()) {
        partial_ops_.push_back(p.reduce_op());
      }
    }
  }
  local_bytes_ =
      PaddedLocalBytes(nodes_[node].state, mesh_shape_, global_shape_, dtype_);
  ExpandGathers(node);
  ExpandAllToAlls(node);
  ExpandPartials(node);
  ExpandLocal(node);
  ExpandPermutes(node);
}

RedistributePlan PlanSearch::Run(const Sharding& from) {
  nodes_.push_back(Node{from});
  index_.emplace(from, 0);
  queue_.emplace(Heuristic(from), 0, 0, 0.0);
  int goal = -1;
  while (!queue_.empty()) {
    const auto [estimate, steps, node, cost] = queue_.top();
    queue_.pop();
    if (nodes_[node].settled || cost > nodes_[node].cost ||
        steps > nodes_[node].steps) {
      continue;
    }
    nodes_[node].settled = true;
    if (nodes_[node].state == to_) {
      goal = node;
      break;
    }
    Expand(node);
  }
  RedistributePlan plan;
  if (goal < 0) return plan;  // Unreachable: CheckRedistribution passed.
  for (int n = goal; nodes_[n].parent >= 0; n = nodes_[n].parent) {
    const Node& to = nodes_[n];
    RedistributeStep step;
    step.kind = to.kind;
    step.mesh_dims.assign(to.mesh_dims.begin(), to.mesh_dims.end());
    step.tensor_dims.assign(to.tensor_dims.begin(), to.tensor_dims.end());
    step.bytes_per_rank = to.step_bytes;
    step.cost_us = to.step_cost;
    step.before = nodes_[nodes_[n].parent].state;
    step.after = nodes_[n].state;
    plan.steps.push_back(std::move(step));
  }
  std::reverse(plan.steps.begin(), plan.steps.end());
  plan.total_cost_us = nodes_[goal].cost;
  return plan;
}

}  // namespace

double PaddedLocalBytes(const Sharding& sharding,
                        absl::Span<const int64_t> mesh_shape,
                        absl::Span<const int64_t> global_shape, DType dtype) {
  double elements = 1;
  for (int64_t d = 0; d < sharding.tensor_rank(); ++d) {
    int64_t extent = global_shape[d];
    for (int64_t m : sharding.MeshDimsSharding(d)) {
      extent = (extent + mesh_shape[m] - 1) / mesh_shape[m];
    }
    elements *= static_cast<double>(extent);
  }
  return elements * static_cast<double>(ElementSize(dtype));
}

absl::Status CheckRedistribution(const Sharding& from, const Sharding& to,
                                 absl::Span<const int64_t> mesh_shape,
                                 absl::Span<const int64_t> global_shape) {
  const int64_t mesh_ndim = static_cast<int64_t>(mesh_shape.size());
  const int64_t tensor_rank = static_cast<int64_t>(global_shape.size());
  for (const Sharding* layout : {&from, &to}) {
    if (layout->mesh_ndim() != mesh_ndim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout ", layout->ToString(), " has ", layout->mesh_ndim(),
          " placements for a mesh of ", mesh_ndim, " dims [",
          absl::StrJoin(mesh_shape, ", "), "]"));
    }
    if (layout->tensor_rank() != tensor_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout ", layout->ToString(), " is for a tensor of rank ",
          layout->tensor_rank(), ", not of shape [",
          absl::StrJoin(global_shape, ", "), "]"));
    }
  }
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    if (mesh_shape[m] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh dim ", m, " has size ", mesh_shape[m], " (must be >= 1)"));
    }
  }
  for (int64_t d = 0; d < tensor_rank; ++d) {
    if (global_shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor dim ", d, " has negative size ", global_shape[d]));
    }
  }
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const Placement& src = from.placement(m);
    const Placement& dst = to.placement(m);
    if (!dst.is_partial() || src == dst || src.is_replicate()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot redistribute mesh dim ", m, " from ", src.ToString(), " to ",
        dst.ToString(),
        src.is_shard() ? ": Shard -> Partial is not supported"
                       : ": a Partial cannot change its reduce op"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RedistributePlan> PlanRedistribution(
    const Sharding& from, const Sharding& to,
    absl::Span<const int64_t> mesh_shape,
    absl::Span<const int64_t> global_shape, DType dtype,
    const CostModel& cost_model) {
  absl::Status status = CheckRedistribution(from, to, mesh_shape, global_shape);
  if (!status.ok()) return status;
  if (cost_model.mesh_ndim() != static_cast<int64_t>(mesh_shape.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model for ", cost_model.mesh_ndim(),
                     " mesh dims used on a mesh of ", mesh_shape.size()));
  }
  return PlanSearch(to, mesh_shape, global_shape, dtype, cost_model).Run(from);
}

RedistributePlanner& RedistributePlanner::Shared() {
  static RedistributePlanner* planner = new RedistributePlanner();
  return *planner;
}

absl::StatusOr<std::shared_ptr<const RedistributePlan>>
RedistributePlanner::Plan(const Sharding& from, const Sharding& to,
                          absl::Span<const int64_t> mesh_shape,
                          absl::Span<const int64_t> global_shape, DType dtype,
                          const CostModel& cost_model) const {
  Key key{from,
          to,
          {mesh_shape.begin(), mesh_shape.end()},
          {global_shape.begin(), global_shape.end()},
          dtype,
          cost_model};
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  absl::StatusOr<RedistributePlan> plan =
      PlanRedistribution(from, to, mesh_shape, global_shape, dtype, cost_model);
  if (!plan.ok()) return plan.status();
  auto shared = std::make_shared<const RedistributePlan>(*std::move(plan));
  absl::MutexLock lock(&mu_);
  return cache_.try_emplace(std::move(key), std::move(shared)).first->second;
}

}  // namespace dtensor
