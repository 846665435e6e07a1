#include "dtensor/redistribute_planner.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace {

using MeshDims = std::vector<int64_t>;

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

// Dijkstra over layouts. States are Shardings; edges are the steps listed in
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
        cost_model_(cost_model) {}

  RedistributePlan Run(const Sharding& from);

 private:
  struct Node {
    Sharding state;
    double cost = 0;
    int steps = 0;
    int parent = -1;
    bool settled = false;
    RedistributeStep step;  // The step into this node (before/after unset).
  };
  // (cost, steps, node): ties go to fewer steps, then to the earlier node.
  using QueueEntry = std::tuple<double, int, int>;

  void Expand(int node);
  void ExpandGathers(int node);
  void ExpandAllToAlls(int node);
  void ExpandPartials(int node);
  void ExpandLocal(int node);
  void ExpandPermutes(int node);
  // Offers `next`, reached from `node` by a `kind` step.
  void Relax(int node, const Sharding& next, CommKind kind, MeshDims mesh_dims,
             MeshDims tensor_dims);
  // Whether a permute from `from` to `to` is a bijection between equal blocks
  // (same blocks per coordinate of the Partial mesh dims, same multiplicity).
  bool HoldsSameBlocks(const Sharding& from, const Sharding& to) const;
  int64_t GroupSize(const MeshDims& mesh_dims) const;

  const Sharding& to_;
  absl::Span<const int64_t> mesh_shape_;
  absl::Span<const int64_t> global_shape_;
  DType dtype_;
  const CostModel& cost_model_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<Sharding, int> index_;
  std::priority_queue<QueueEntry, std::vector<QueueEntry>,
                      std::greater<QueueEntry>>
      queue_;
};

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
  target.step.kind = kind;
  target.step.mesh_dims = std::move(mesh_dims);
  target.step.tensor_dims = std::move(tensor_dims);
  target.step.bytes_per_rank = CostModel::ReceivedBytes(
      kind, GroupSize(target.step.mesh_dims), local_bytes);
  target.step.cost_us = step_cost;
  queue_.emplace(cost, steps, it->second);
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
        Relax(node, gathered.WithShardsAppended(suffix, to),
              CommKind::kAllToAll, suffix, {from, to});
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
    const Placement& target = to_.placement(m);
    if (target.is_partial()) {
      Relax(node, state.WithPartial(m, target.reduce_op()), CommKind::kLocal,
            {m}, {});
    }
  }
}

bool PlanSearch::HoldsSameBlocks(const Sharding& from,
                                 const Sharding& to) const {
  // With every tensor dim divisible by the product of the mesh sizes sharding
  // it, any nesting yields the same equal blocks.
  bool divisible = true;
  for (int64_t d = 0; d < from.tensor_rank(); ++d) {
    int64_t parts = 1;
    for (int64_t m : to.MeshDimsSharding(d)) parts *= mesh_shape_[m];
    if (global_shape_[d] % parts != 0) divisible = false;
  }
  if (divisible) return true;
  // Otherwise compare the blocks rank by rank: every non-empty block `to`
  // needs must be held, at the same Partial coordinates, by as many ranks.
  std::vector<int64_t> partial_dims;
  for (int64_t m = 0; m < from.mesh_ndim(); ++m) {
    if (from.placement(m).is_partial()) partial_dims.push_back(m);
  }
  absl::flat_hash_map<std::vector<int64_t>, int64_t> available;
  auto key_of = [&](const ShardBlock& block,
                    const std::vector<int64_t>& coord) {
    std::vector<int64_t> key = block.offset;
    key.insert(key.end(), block.shape.begin(), block.shape.end());
    for (int64_t m : partial_dims) key.push_back(coord[m]);
    return key;
  };
  std::vector<int64_t> coord(mesh_shape_.size(), 0);
  int64_t num_ranks = 1;
  for (int64_t size : mesh_shape_) num_ranks *= size;
  for (int pass = 0; pass < 2; ++pass) {
    const Sharding& layout = pass == 0 ? from : to;
    for (int64_t r = 0; r < num_ranks; ++r) {
      int64_t rest = r;
      for (int64_t m = static_cast<int64_t>(mesh_shape_.size()) - 1; m >= 0;
           --m) {
        coord[m] = rest % mesh_shape_[m];
        rest /= mesh_shape_[m];
      }
      absl::StatusOr<ShardBlock> block =
          ShardBlockAt(layout, mesh_shape_, global_shape_, coord);
      if (!block.ok()) return false;
      if (block->empty()) continue;
      int64_t& count = available[key_of(*block, coord)];
      if (pass == 0) {
        ++count;
      } else if (--count < 0) {
        return false;
      }
    }
  }
  return true;
}

void PlanSearch::ExpandPermutes(int node) {
  const Sharding state = nodes_[node].state;
  // Mesh dims free to be reassigned (not Partial), and the block count of
  // every tensor dim that a permute must preserve.
  MeshDims free_dims;
  for (int64_t m = 0; m < state.mesh_ndim(); ++m) {
    if (!state.placement(m).is_partial()) free_dims.push_back(m);
  }
  std::vector<int64_t> parts(state.tensor_rank(), 1);
  for (int64_t d = 0; d < state.tensor_rank(); ++d) {
    for (int64_t m : state.MeshDimsSharding(d)) parts[d] *= mesh_shape_[m];
  }
  const Sharding cleared = state.WithReplicated(free_dims);
  // Every assignment of the free mesh dims to a tensor dim or to Replicate
  // (-1) that keeps the block counts, then every nesting order.
  std::vector<int64_t> assignment(free_dims.size(), -1);
  std::function<void(size_t)> assign = [&](size_t i) {
    if (i == free_dims.size()) {
      std::vector<MeshDims> by_dim(state.tensor_rank());
      std::vector<int64_t> got(state.tensor_rank(), 1);
      for (size_t j = 0; j < free_dims.size(); ++j) {
        if (assignment[j] < 0) continue;
        by_dim[assignment[j]].push_back(free_dims[j]);
        got[assignment[j]] *= mesh_shape_[free_dims[j]];
      }
      if (got != parts) return;
      std::function<void(int64_t, const Sharding&)> order =
          [&](int64_t d, const Sharding& partial_layout) {
            if (d == state.tensor_rank()) {
              if (partial_layout != state &&
                  HoldsSameBlocks(state, partial_layout)) {
                Relax(node, partial_layout, CommKind::kPermute, free_dims, {});
              }
              return;
            }
            MeshDims dims = by_dim[d];
            do {
              order(d + 1, partial_layout.WithShardsAppended(dims, d));
            } while (std::next_permutation(dims.begin(), dims.end()));
          };
      order(0, cleared);
      return;
    }
    for (int64_t d = -1; d < state.tensor_rank(); ++d) {
      assignment[i] = d;
      assign(i + 1);
    }
  };
  assign(0);
}

void PlanSearch::Expand(int node) {
  ExpandGathers(node);
  ExpandAllToAlls(node);
  ExpandPartials(node);
  ExpandLocal(node);
  ExpandPermutes(node);
}

RedistributePlan PlanSearch::Run(const Sharding& from) {
  nodes_.push_back(Node{from});
  index_.emplace(from, 0);
  queue_.emplace(0.0, 0, 0);
  int goal = -1;
  while (!queue_.empty()) {
    const auto [cost, steps, node] = queue_.top();
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
    RedistributeStep step = nodes_[n].step;
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
