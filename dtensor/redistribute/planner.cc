#include "dtensor/redistribute/planner.h"

#include <algorithm>
#include <array>
#include <functional>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/redistribute/packed_sharding.h"
#include "dtensor/redistribute/planner_moves.h"
#include "dtensor/redistribute/planner_permute_classes.h"
#include "dtensor/redistribute/unit_mesh_dims.h"

namespace dtensor {
namespace {

// The cheapest conceivable collective: one launch and one hop over the
// fastest mesh dim (0 on a mesh of no dims).
double MinCollectiveUs(absl::Span<const int64_t> mesh_shape,
                       const CostModel& cost_model) {
  double min_us = 0;
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    const double us =
        cost_model.launch_us() + cost_model.links()[m].hop_latency_us;
    if (min_us == 0 || us < min_us) min_us = us;
  }
  return min_us;
}

// Whether every tensor dim's extent divides by the number of ranks of the mesh
// (then every sharding splits it into equal blocks).
bool EvenBlocks(absl::Span<const int64_t> mesh_shape,
                absl::Span<const int64_t> global_shape) {
  int64_t ranks = 1;
  for (int64_t size : mesh_shape) ranks *= size;
  return std::all_of(global_shape.begin(), global_shape.end(),
                     [&](int64_t extent) { return extent % ranks == 0; });
}

// The bytes of a whole tensor.
double TotalBytes(absl::Span<const int64_t> global_shape, DType dtype) {
  double elements = 1;
  for (int64_t extent : global_shape) elements *= static_cast<double>(extent);
  return elements * static_cast<double>(ElementSize(dtype));
}

// The bandwidth of the fastest link of the mesh.
double MaxBandwidthGbps(const CostModel& cost_model) {
  double max_gbps = 0;
  for (const MeshDimLink& link : cost_model.links()) {
    max_gbps = std::max(max_gbps, link.bandwidth_gbps);
  }
  return max_gbps;
}

// A* over shardings. States are PackedShardings; edges are the steps listed in
// the header; the first time the target is settled its path is optimal. On a
// mesh without size-1 dims (PlanRedistribution leaves them out).
class PlanSearch {
 public:
  PlanSearch(const Sharding& to, absl::Span<const int64_t> mesh_shape,
             absl::Span<const int64_t> global_shape, DType dtype,
             const CostModel& cost_model);

  // Errors: Internal when the search exhausts the shardings without reaching
  // `to` (CheckRedistribution admits only pairs with a path).
  absl::StatusOr<RedistributePlan> Run(const Sharding& from);

 private:
  struct Node {
    PackedSharding state;
    double cost = 0;
    // The A* lower bound on the cost from `state` to the target.
    double heuristic = 0;
    int steps = 0;
    int parent = -1;
    bool settled = false;
    // The step into this node (trivially copyable: nodes are copied as the
    // node list grows).
    CommKind kind = CommKind::kLocal;
    int8_t num_mesh_dims = 0;
    int8_t num_tensor_dims = 0;
    std::array<int8_t, PackedSharding::kMaxMeshDims> mesh_dims;
    std::array<int8_t, 2> tensor_dims;
    double step_cost = 0;
  };
  // (cost + heuristic, steps, node, cost): ties go to fewer steps, then to
  // the earlier node.
  using QueueEntry = std::tuple<double, int, int, double>;

  void Push(const QueueEntry& entry) {
    queue_.push_back(entry);
    std::push_heap(queue_.begin(), queue_.end(), std::greater<QueueEntry>());
  }
  // Offers `next`, reached from `node` by `step` over `mesh_dims`.
  void Relax(int node, PackedSharding next, PlannerMoves::Step step,
             absl::Span<const int64_t> mesh_dims,
             absl::Span<const int64_t> tensor_dims);
  // The bytes of the block of final values a rank holds in `packed`: its
  // local bytes, or 0 while a mesh dim is Partial (a rank holds
  // terms, not values). Requires even_.
  double ValueBytes(PackedSharding packed) const;
  // A lower bound on the cost from `state` to the target (A*): the launch and
  // hop of the cheapest possible collective for each of "a Partial must be
  // reduced" and "a shard must move", plus, when blocks are even, the time to
  // receive the target's values that a rank lacks. Consistent, so the first
  // time the target is settled its path is optimal.
  double Heuristic(PackedSharding state) const;

  const PlanShapes shapes_;
  DType dtype_;
  const PackedSharding to_;
  PlannerMoves moves_;
  // The cheapest conceivable collective (the A* bound's unit).
  const double min_collective_us_;
  // Whether every tensor dim divides evenly among all the mesh's ranks, so
  // that every sharding's blocks are even (the bytes bound needs it).
  const bool even_;
  // The tensor's bytes.
  const double total_bytes_;
  // ValueBytes of the target, when even_.
  const double target_value_bytes_;
  // The fastest link (the bytes bound's unit).
  const double max_bandwidth_gbps_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, int> index_;
  // A min-heap (std::push_heap with std::greater), reserved once.
  std::vector<QueueEntry> queue_;
};

PlanSearch::PlanSearch(const Sharding& to, absl::Span<const int64_t> mesh_shape,
                       absl::Span<const int64_t> global_shape, DType dtype,
                       const CostModel& cost_model)
    : shapes_(mesh_shape, global_shape),
      dtype_(dtype),
      to_(PackedSharding::Pack(to)),
      moves_(to_, mesh_shape, global_shape, dtype, cost_model),
      min_collective_us_(MinCollectiveUs(mesh_shape, cost_model)),
      even_(EvenBlocks(mesh_shape, global_shape)),
      total_bytes_(TotalBytes(global_shape, dtype)),
      target_value_bytes_(even_ ? ValueBytes(to_) : 0),
      max_bandwidth_gbps_(MaxBandwidthGbps(cost_model)) {}

double PlanSearch::ValueBytes(PackedSharding packed) const {
  int64_t blocks = 1;
  for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
    if (packed.is_partial(m)) return 0;
    if (packed.is_shard(m)) blocks *= shapes_.mesh_shape[m];
  }
  return total_bytes_ / static_cast<double>(blocks);
}

double PlanSearch::Heuristic(PackedSharding state) const {
  if (min_collective_us_ == 0) return 0;
  // Only an all-reduce or a reduce-scatter removes a Partial the target
  // lacks, and neither moves a shard that local slices (which only
  // append) cannot extend into the target's, i.e. one that does not have the
  // target's tensor dim and depth: each need costs at least one collective.
  bool needs_reduction = false;
  bool needs_move = false;
  for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
    const uint8_t code = state.code(m);
    if (code == PackedSharding::kReplicateCode || code == to_.code(m)) {
      continue;
    }
    (PackedSharding::IsPartialCode(code) ? needs_reduction : needs_move) = true;
  }
  double bound = (needs_reduction + needs_move) * min_collective_us_;
  // With even blocks, no step raises the value bytes of a rank by more than
  // the bytes it charges: an all-gather over n ranks multiplies B by n and
  // charges (n-1)B; an all-to-all or a permute keeps B; a reduce-scatter or
  // all-reduce that completes the reduction yields at most B (B/n) for its
  // 2(n-1)/n B ((n-1)/n B); local steps only lose values. So the target's
  // missing value bytes take at least that long on the fastest link (a hair
  // less, so that rounding never makes the bound exceed a true cost).
  if (even_) {
    const double missing = target_value_bytes_ - ValueBytes(state);
    if (missing > 0) {
      bound += missing / (max_bandwidth_gbps_ * 1e3) * (1 - 1e-9);
    }
  }
  return bound;
}

void PlanSearch::Relax(int node, PackedSharding next, PlannerMoves::Step step,
                       absl::Span<const int64_t> mesh_dims,
                       absl::Span<const int64_t> tensor_dims) {
  const double cost = nodes_[node].cost + step.cost_us;
  const int steps = nodes_[node].steps + 1;
  auto [it, inserted] =
      index_.try_emplace(next.bits(), static_cast<int>(nodes_.size()));
  if (inserted) {
    nodes_.push_back(Node{next});
    nodes_.back().heuristic = Heuristic(next);
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
  target.kind = step.kind;
  target.step_cost = step.cost_us;
  target.num_mesh_dims = static_cast<int8_t>(mesh_dims.size());
  std::copy(mesh_dims.begin(), mesh_dims.end(), target.mesh_dims.begin());
  target.num_tensor_dims = static_cast<int8_t>(tensor_dims.size());
  std::copy(tensor_dims.begin(), tensor_dims.end(), target.tensor_dims.begin());
  Push({cost + target.heuristic, steps, it->second, cost});
}

absl::StatusOr<RedistributePlan> PlanSearch::Run(const Sharding& from) {
  const PackedSharding start = PackedSharding::Pack(from);
  nodes_.reserve(256);
  index_.reserve(256);
  nodes_.push_back(Node{start});
  nodes_[0].heuristic = Heuristic(start);
  index_.emplace(start.bits(), 0);
  queue_.reserve(1024);
  Push({nodes_[0].heuristic, 0, 0, 0.0});
  int goal = -1;
  while (!queue_.empty()) {
    std::pop_heap(queue_.begin(), queue_.end(), std::greater<QueueEntry>());
    const auto [estimate, steps, node, cost] = queue_.back();
    queue_.pop_back();
    if (nodes_[node].settled || cost > nodes_[node].cost ||
        steps > nodes_[node].steps) {
      continue;
    }
    nodes_[node].settled = true;
    if (nodes_[node].state == to_) {
      goal = node;
      break;
    }
    moves_.ForEachNeighbor(nodes_[node].state, nodes_[node].cost,
                           [&](PackedSharding next, PlannerMoves::Step step,
                               absl::Span<const int64_t> mesh_dims,
                               absl::Span<const int64_t> tensor_dims) {
                             Relax(node, next, step, mesh_dims, tensor_dims);
                           });
  }
  if (goal < 0) {
    return absl::InternalError(absl::StrCat(
        "the redistribution planner found no path from ", from.ToString(),
        " to ", to_.Unpack(shapes_.mesh_ndim, shapes_.tensor_rank).ToString(),
        " although CheckRedistribution admitted them"));
  }
  RedistributePlan plan;
  Sharding after = to_.Unpack(shapes_.mesh_ndim, shapes_.tensor_rank);
  for (int n = goal; nodes_[n].parent >= 0; n = nodes_[n].parent) {
    const Node& to = nodes_[n];
    RedistributeStep step;
    step.kind = to.kind;
    step.mesh_dims.assign(to.mesh_dims.begin(),
                          to.mesh_dims.begin() + to.num_mesh_dims);
    step.tensor_dims.assign(to.tensor_dims.begin(),
                            to.tensor_dims.begin() + to.num_tensor_dims);
    step.before =
        nodes_[to.parent].state.Unpack(shapes_.mesh_ndim, shapes_.tensor_rank);
    step.after = std::move(after);
    after = step.before;
    step.bytes_per_rank = CostModel::ReceivedBytes(
        to.kind, GroupSize(step.mesh_dims, shapes_.mesh_shape),
        PaddedLocalBytes(step.before, shapes_.mesh_shape, shapes_.global_shape,
                         dtype_));
    step.cost_us = to.step_cost;
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
  for (const Sharding* sharding : {&from, &to}) {
    if (sharding->mesh_ndim() != mesh_ndim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout ", sharding->ToString(), " has ", sharding->mesh_ndim(),
          " placements for a mesh of ", mesh_ndim, " dims [",
          absl::StrJoin(mesh_shape, ", "), "]"));
    }
    if (sharding->tensor_rank() != tensor_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout ", sharding->ToString(), " is for a tensor of rank ",
          sharding->tensor_rank(), ", not of shape [",
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

namespace {

// CheckRedistribution, and the planner's limits: the mesh and tensor ranks
// it packs, a cost model for the mesh.
absl::Status CheckPlannable(const Sharding& from, const Sharding& to,
                            absl::Span<const int64_t> mesh_shape,
                            absl::Span<const int64_t> global_shape,
                            const CostModel& cost_model) {
  absl::Status status = CheckRedistribution(from, to, mesh_shape, global_shape);
  if (!status.ok()) return status;
  if (!PackedSharding::Fits(from.mesh_ndim(), from.tensor_rank())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot plan for a mesh of ", from.mesh_ndim(),
        " dims and a tensor of rank ", from.tensor_rank(),
        ": the planner supports at most ", PackedSharding::kMaxMeshDims,
        " mesh dims and tensor rank ", PackedSharding::kMaxTensorRank));
  }
  if (cost_model.mesh_ndim() != static_cast<int64_t>(mesh_shape.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model for ", cost_model.mesh_ndim(),
                     " mesh dims used on a mesh of ", mesh_shape.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RedistributePlan> PlanRedistribution(
    const Sharding& from, const Sharding& to,
    absl::Span<const int64_t> mesh_shape,
    absl::Span<const int64_t> global_shape, DType dtype,
    const CostModel& cost_model) {
  absl::Status status =
      CheckPlannable(from, to, mesh_shape, global_shape, cost_model);
  if (!status.ok()) return status;
  // The search runs on the mesh without its size-1 dims, where no move
  // multiplies by their placements.
  const MeshWithoutUnitDims without_unit_dims(mesh_shape, cost_model);
  if (!without_unit_dims.has_unit_dims()) {
    return PlanSearch(to, mesh_shape, global_shape, dtype, cost_model)
        .Run(from);
  }
  absl::StatusOr<RedistributePlan> plan =
      PlanSearch(without_unit_dims.Drop(to), without_unit_dims.shape(),
                 global_shape, dtype, without_unit_dims.cost_model())
          .Run(without_unit_dims.Drop(from));
  if (!plan.ok()) return plan.status();
  return without_unit_dims.Lift(*plan, from, to);
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
    ReaderMutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  absl::StatusOr<RedistributePlan> plan =
      PlanCached(from, to, mesh_shape, global_shape, dtype, cost_model);
  if (!plan.ok()) return plan.status();
  auto shared = std::make_shared<const RedistributePlan>(*std::move(plan));
  MutexLock lock(&mu_);
  // Clear-when-full bounds the memory at `capacity_` plans: a training loop
  // asks for a few dozen distinct plans, so a full cache means keys that no
  // longer recur (shapes of past inputs); plans handed out stay alive.
  if (cache_.size() >= capacity_ && !cache_.contains(key)) cache_.clear();
  return cache_.try_emplace(std::move(key), std::move(shared)).first->second;
}

absl::StatusOr<RedistributePlan> RedistributePlanner::PlanCached(
    const Sharding& from, const Sharding& to,
    absl::Span<const int64_t> mesh_shape,
    absl::Span<const int64_t> global_shape, DType dtype,
    const CostModel& cost_model) const {
  const MeshWithoutUnitDims without_unit_dims(mesh_shape, cost_model);
  if (!without_unit_dims.has_unit_dims()) {
    return PlanRedistribution(from, to, mesh_shape, global_shape, dtype,
                              cost_model);
  }
  // Shardings that differ only on the size-1 mesh dims share the search on
  // the mesh without them (cached under its own key).
  absl::Status status =
      CheckPlannable(from, to, mesh_shape, global_shape, cost_model);
  if (!status.ok()) return status;
  absl::StatusOr<std::shared_ptr<const RedistributePlan>> plan =
      Plan(without_unit_dims.Drop(from), without_unit_dims.Drop(to),
           without_unit_dims.shape(), global_shape, dtype,
           without_unit_dims.cost_model());
  if (!plan.ok()) return plan.status();
  return without_unit_dims.Lift(**plan, from, to);
}

void RedistributePlanner::Clear() {
  MutexLock lock(&mu_);
  cache_.clear();
}

size_t RedistributePlanner::size() const {
  ReaderMutexLock lock(&mu_);
  return cache_.size();
}

}  // namespace dtensor
