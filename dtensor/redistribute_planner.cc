#include "dtensor/redistribute_planner.h"

#include <algorithm>
#include <array>
#include <functional>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/planner_layout.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace {

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

// Whether every tensor dim's extent divides by the number of ranks of the mesh
// (then every layout splits it into equal blocks).
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

// The non-empty ranges [offset, offset + size) into which `mesh_dims`
// (outermost first) chunk an extent, one per combination of their coordinates,
// sorted.
std::vector<std::pair<int64_t, int64_t>> NonEmptyChunks(
    int64_t extent, absl::Span<const int64_t> mesh_dims,
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

// A* over layouts. States are PlannerLayouts; edges are the steps listed in
// the header; the first time the target is settled its path is optimal.
class PlanSearch {
 public:
  PlanSearch(const Sharding& to, absl::Span<const int64_t> mesh_shape,
             absl::Span<const int64_t> global_shape, DType dtype,
             const CostModel& cost_model);

  RedistributePlan Run(const Sharding& from);

 private:
  struct Node {
    PlannerLayout state;
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
    std::array<int8_t, PlannerLayout::kMaxMeshDims> mesh_dims;
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
  void Expand(int node);
  void ExpandGathers(int node, const ShardOrders& orders);
  void ExpandAllToAlls(int node, const ShardOrders& orders);
  void ExpandPartials(int node, const ShardOrders& orders);
  void ExpandLocal(int node, const ShardOrders& orders);
  void ExpandPermutes(int node, const ShardOrders& orders);
  // The layouts a permute can reach from one another: same Partial mesh
  // dims, every tensor dim split into as many blocks.
  struct PermuteClass {
    std::vector<PlannerLayout> layouts;
    // Whether some tensor dim's blocks are uneven (so a permute must check
    // that the blocks coincide).
    bool uneven = false;
    // (cost, local bytes) of the members whose permutes were expanded.
    std::vector<std::pair<double, double>> expanded;
  };
  // The class of `state`, made on first use and cached by its key.
  PermuteClass& PermuteClassOf(PlannerLayout state, const ShardOrders& orders);
  // Appends the members of a permute class whose free (non-Partial) mesh
  // dims free_dims[i], i >= j, are assigned (to tensor dim `assignment[i]`,
  // or -1 for Replicate), placing the others so that `parts_left[d]` more
  // blocks are made along each tensor dim d. The order is that of a counter
  // over the assignment whose fastest digit is free_dims[0].
  void AddAssignments(const MeshDimList& free_dims, size_t j,
                      absl::Span<int64_t> assignment,
                      absl::Span<int64_t> parts_left, PlannerLayout partials,
                      std::vector<PlannerLayout>* members);
  // Appends `layout` with the mesh dims `by_dim[e]` sharding tensor dim e,
  // for e >= d, in every nesting order.
  void AddOrders(std::vector<MeshDimList>& by_dim, int64_t d,
                 PlannerLayout layout,
                 std::vector<PlannerLayout>* members) const;
  // The mesh dims along which a permute from `from` to `to` moves data.
  MeshDimList MovedMeshDims(PlannerLayout from, PlannerLayout to) const;
  // Whether a permute from `from` (whose shard orders are `from_orders`) to
  // `to` can deliver every block `to` needs.
  bool HoldsSameBlocks(const ShardOrders& from_orders, PlannerLayout to) const;
  // A step's kind and cost from the node being expanded.
  struct Step {
    CommKind kind;
    double cost_us;
  };
  // A `kind` step over `mesh_dims` from the node being expanded: local when
  // the group has one rank (it moves nothing). The moves compute it once for
  // all the layouts the same collective can reach.
  Step MakeStep(CommKind kind, absl::Span<const int64_t> mesh_dims) const;
  // Offers `next`, reached from `node` by `step` over `mesh_dims`.
  void Relax(int node, PlannerLayout next, Step step,
             absl::Span<const int64_t> mesh_dims,
             std::initializer_list<int64_t> tensor_dims);
  int64_t GroupSize(absl::Span<const int64_t> mesh_dims) const;
  // Padded local bytes of a layout with shard orders `orders`.
  double LocalBytes(const ShardOrders& orders) const;
  // `layout` as the cost model sees it: mesh dims of size 1 Replicate (their
  // chunk is everything) and each shard's position counting only mesh dims of
  // size > 1. Two layouts agree on a mesh dim of size > 1 here exactly when
  // it plays the same role in both.
  PlannerLayout Effective(PlannerLayout layout) const;
  // The bytes of the block of final values a rank holds in `layout`: its
  // local bytes, or 0 while a mesh dim of size > 1 is Partial (a rank holds
  // terms, not values). Requires even_.
  double ValueBytes(PlannerLayout layout) const;
  // A lower bound on the cost from `state` to the target (A*): the launch and
  // hop of the cheapest possible collective for each of "a Partial must be
  // reduced" and "a shard must move", plus, when blocks are even, the time to
  // receive the target's values that a rank lacks. Consistent, so the first
  // time the target is settled its path is optimal.
  double Heuristic(PlannerLayout state) const;

  const int64_t mesh_ndim_;
  const int64_t tensor_rank_;
  absl::Span<const int64_t> mesh_shape_;
  absl::Span<const int64_t> global_shape_;
  DType dtype_;
  const CostModel& cost_model_;
  const PlannerLayout to_;
  // Whether some mesh dim has size 1.
  const bool has_unit_mesh_dims_;
  const PlannerLayout effective_to_;
  // The cheapest conceivable collective (the A* bound's unit).
  const double min_collective_us_;
  // Whether every permute from a layout costs the same.
  const bool uniform_permute_costs_;
  // Whether every tensor dim divides evenly among all the mesh's ranks, so
  // that every layout's blocks are even (the bytes bound needs it).
  const bool even_;
  // The tensor's bytes.
  const double total_bytes_;
  // ValueBytes of the target, when even_.
  const double target_value_bytes_;
  // The fastest link (the bytes bound's unit).
  const double max_bandwidth_gbps_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, int> index_;
  absl::flat_hash_map<absl::InlinedVector<int64_t, 8>, PermuteClass>
      permute_classes_;
  // The ops Replicate -> Partial may introduce at the node being expanded.
  absl::InlinedVector<ReduceOp, 4> partial_ops_;
  // Padded local bytes of the node being expanded.
  double local_bytes_ = 0;
  // Scratch of AddAssignments: the mesh dims assigned to each tensor dim.
  std::vector<MeshDimList> by_dim_;
  // A min-heap (std::push_heap with std::greater), reserved once.
  std::vector<QueueEntry> queue_;
};

PlanSearch::PlanSearch(const Sharding& to, absl::Span<const int64_t> mesh_shape,
                       absl::Span<const int64_t> global_shape, DType dtype,
                       const CostModel& cost_model)
    : mesh_ndim_(static_cast<int64_t>(mesh_shape.size())),
      tensor_rank_(static_cast<int64_t>(global_shape.size())),
      mesh_shape_(mesh_shape),
      global_shape_(global_shape),
      dtype_(dtype),
      cost_model_(cost_model),
      to_(PlannerLayout::Pack(to)),
      has_unit_mesh_dims_(std::find(mesh_shape.begin(), mesh_shape.end(), 1) !=
                          mesh_shape.end()),
      effective_to_(Effective(to_)),
      min_collective_us_(MinCollectiveUs(mesh_shape, cost_model)),
      uniform_permute_costs_(UniformPermuteCosts(mesh_shape, cost_model)),
      even_(EvenBlocks(mesh_shape, global_shape)),
      total_bytes_(TotalBytes(global_shape, dtype)),
      target_value_bytes_(even_ ? ValueBytes(to_) : 0),
      max_bandwidth_gbps_(MaxBandwidthGbps(cost_model)),
      by_dim_(tensor_rank_) {}

PlannerLayout PlanSearch::Effective(PlannerLayout layout) const {
  if (!has_unit_mesh_dims_) return layout;
  PlannerLayout effective = layout;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    if (mesh_shape_[m] == 1) {
      effective = effective.WithCode(m, PlannerLayout::kReplicateCode);
    } else if (layout.is_shard(m)) {
      int64_t depth = 0;
      for (int64_t other = 0; other < mesh_ndim_; ++other) {
        if (mesh_shape_[other] > 1 && layout.is_shard(other) &&
            layout.shard_dim(other) == layout.shard_dim(m) &&
            layout.position(other) < layout.position(m)) {
          ++depth;
        }
      }
      effective = effective.WithCode(
          m, PlannerLayout::ShardCode(layout.shard_dim(m), depth));
    }
  }
  return effective;
}

double PlanSearch::ValueBytes(PlannerLayout layout) const {
  int64_t blocks = 1;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    if (layout.is_partial(m) && mesh_shape_[m] > 1) return 0;
    if (layout.is_shard(m)) blocks *= mesh_shape_[m];
  }
  return total_bytes_ / static_cast<double>(blocks);
}

double PlanSearch::Heuristic(PlannerLayout state) const {
  if (min_collective_us_ == 0) return 0;
  // Mesh dims of size 1 never need a collective (Effective makes them
  // Replicate). Only an all-reduce or a reduce-scatter removes a Partial the
  // target lacks, and neither moves a shard that local slices (which only
  // append) cannot extend into the target's, i.e. one that does not have the
  // target's tensor dim and depth: each need costs at least one collective.
  const PlannerLayout effective = Effective(state);
  bool needs_reduction = false;
  bool needs_move = false;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    const uint8_t code = effective.code(m);
    if (code == PlannerLayout::kReplicateCode ||
        code == effective_to_.code(m)) {
      continue;
    }
    (PlannerLayout::IsPartialCode(code) ? needs_reduction : needs_move) = true;
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

int64_t PlanSearch::GroupSize(absl::Span<const int64_t> mesh_dims) const {
  int64_t size = 1;
  for (int64_t m : mesh_dims) size *= mesh_shape_[m];
  return size;
}

double PlanSearch::LocalBytes(const ShardOrders& orders) const {
  // As PaddedLocalBytes, on the decoded layout.
  double elements = 1;
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    int64_t extent = global_shape_[d];
    for (int64_t m : orders.of(d)) {
      extent = (extent + mesh_shape_[m] - 1) / mesh_shape_[m];
    }
    elements *= static_cast<double>(extent);
  }
  return elements * static_cast<double>(ElementSize(dtype_));
}

PlanSearch::Step PlanSearch::MakeStep(
    CommKind kind, absl::Span<const int64_t> mesh_dims) const {
  if (kind != CommKind::kLocal && GroupSize(mesh_dims) == 1) {
    kind = CommKind::kLocal;
  }
  return {kind,
          cost_model_.StepCostUs(kind, mesh_dims, mesh_shape_, local_bytes_)};
}

void PlanSearch::Relax(int node, PlannerLayout next, Step step,
                       absl::Span<const int64_t> mesh_dims,
                       std::initializer_list<int64_t> tensor_dims) {
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

void PlanSearch::ExpandGathers(int node, const ShardOrders& orders) {
  const PlannerLayout state = nodes_[node].state;
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    const absl::Span<const int64_t> order = orders.of(d);
    for (size_t start = 0; start < order.size(); ++start) {
      const absl::Span<const int64_t> suffix = order.subspan(start);
      Relax(node, state.WithReplicated(suffix),
            MakeStep(CommKind::kAllGather, suffix), suffix, {d});
    }
  }
}

void PlanSearch::ExpandAllToAlls(int node, const ShardOrders& orders) {
  const PlannerLayout state = nodes_[node].state;
  for (int64_t from = 0; from < tensor_rank_; ++from) {
    const absl::Span<const int64_t> order = orders.of(from);
    for (size_t start = 0; start < order.size(); ++start) {
      const absl::Span<const int64_t> suffix = order.subspan(start);
      const PlannerLayout gathered = state.WithReplicated(suffix);
      const Step step = MakeStep(CommKind::kAllToAll, suffix);
      for (int64_t to = 0; to < tensor_rank_; ++to) {
        if (to == from) continue;
        // The moved mesh dims may land in any order: the same exchange.
        MeshDimList landing(suffix.begin(), suffix.end());
        std::sort(landing.begin(), landing.end());
        do {
          Relax(node,
                gathered.WithShardsAppended(landing, to, orders.count(to)),
                step, suffix, {from, to});
        } while (std::next_permutation(landing.begin(), landing.end()));
      }
    }
  }
}

void PlanSearch::ExpandPartials(int node, const ShardOrders& orders) {
  const PlannerLayout state = nodes_[node].state;
  for (int op = 0; op < 4; ++op) {
    MeshDimList same_op;
    for (int64_t m = 0; m < mesh_ndim_; ++m) {
      if (state.code(m) ==
          PlannerLayout::PartialCode(static_cast<ReduceOp>(op))) {
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
      const PlannerLayout reduced = state.WithReplicated(group);
      // All-reduce: any one ordering of the group will do.
      Relax(node, reduced, MakeStep(CommKind::kAllReduce, group), group, {});
      const Step reduce_scatter = MakeStep(CommKind::kReduceScatter, group);
      do {
        for (int64_t d = 0; d < tensor_rank_; ++d) {
          Relax(node, reduced.WithShardsAppended(group, d, orders.count(d)),
                reduce_scatter, group, {d});
        }
      } while (std::next_permutation(group.begin(), group.end()));
    }
  }
}

void PlanSearch::ExpandLocal(int node, const ShardOrders& orders) {
  const PlannerLayout state = nodes_[node].state;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    if (!state.is_replicate(m)) continue;
    const int64_t slice[] = {m};
    const Step local = {CommKind::kLocal, 0};
    for (int64_t d = 0; d < tensor_rank_; ++d) {
      Relax(node, state.WithShardsAppended(slice, d, orders.count(d)), local,
            slice, {d});
    }
    // Replicate -> Partial, so that one reduction collective can cover
    // this mesh dim too: with the target's op here, or with an op some
    // Partial mesh dim already has (sum by default).
    for (ReduceOp op : partial_ops_) {
      Relax(node, state.WithCode(m, PlannerLayout::PartialCode(op)), local,
            slice, {});
    }
  }
}

bool PlanSearch::HoldsSameBlocks(const ShardOrders& from_orders,
                                 PlannerLayout to) const {
  // Both layouts split every tensor dim into as many blocks, with disjoint
  // mesh dims per tensor dim, so every combination of per-dim blocks is held
  // by equally many ranks at every Partial coordinate. A permute can deliver
  // every non-empty block `to` needs when, per tensor dim, its non-empty
  // ranges are among those of `from`.
  const ShardOrders to_orders(to, mesh_ndim_, tensor_rank_);
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    const int64_t parts = GroupSize(to_orders.of(d));
    if (global_shape_[d] % parts == 0) continue;  // Same equal blocks.
    const auto needed =
        NonEmptyChunks(global_shape_[d], to_orders.of(d), mesh_shape_);
    const auto held =
        NonEmptyChunks(global_shape_[d], from_orders.of(d), mesh_shape_);
    if (!std::includes(held.begin(), held.end(), needed.begin(),
                       needed.end())) {
      return false;
    }
  }
  return true;
}

void PlanSearch::AddOrders(std::vector<MeshDimList>& by_dim, int64_t d,
                           PlannerLayout layout,
                           std::vector<PlannerLayout>* members) const {
  if (d == static_cast<int64_t>(by_dim.size())) {
    members->push_back(layout);
    return;
  }
  // Ascending, so the loop visits every order and leaves it ascending.
  MeshDimList& dims = by_dim[d];
  do {
    AddOrders(by_dim, d + 1, layout.WithShardsAppended(dims, d, 0), members);
  } while (std::next_permutation(dims.begin(), dims.end()));
}

void PlanSearch::AddAssignments(const MeshDimList& free_dims, size_t j,
                                absl::Span<int64_t> assignment,
                                absl::Span<int64_t> parts_left,
                                PlannerLayout partials,
                                std::vector<PlannerLayout>* members) {
  // The mesh dims left must still be able to make the blocks left.
  int64_t blocks_left = 1;
  for (int64_t parts : parts_left) blocks_left *= parts;
  int64_t capacity = 1;
  for (size_t i = 0; i < j; ++i) capacity *= mesh_shape_[free_dims[i]];
  if (blocks_left > capacity) return;
  if (j == 0) {
    std::vector<MeshDimList>& by_dim = by_dim_;
    for (MeshDimList& dims : by_dim) dims.clear();
    for (size_t i = 0; i < free_dims.size(); ++i) {
      if (assignment[i] >= 0) by_dim[assignment[i]].push_back(free_dims[i]);
    }
    AddOrders(by_dim, 0, partials, members);
    return;
  }
  // A mesh dim may split a tensor dim only if its size divides the blocks
  // still to make there (the product must come out exact).
  const int64_t size = mesh_shape_[free_dims[j - 1]];
  assignment[j - 1] = -1;
  AddAssignments(free_dims, j - 1, assignment, parts_left, partials, members);
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    if (parts_left[d] % size != 0) continue;
    assignment[j - 1] = d;
    parts_left[d] /= size;
    AddAssignments(free_dims, j - 1, assignment, parts_left, partials, members);
    parts_left[d] *= size;
  }
}

PlanSearch::PermuteClass& PlanSearch::PermuteClassOf(
    PlannerLayout state, const ShardOrders& orders) {
  // The key: the Partial mesh dims with their ops, then the number of blocks
  // of every tensor dim.
  PlannerLayout partials = state;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    if (!state.is_partial(m)) {
      partials = partials.WithCode(m, PlannerLayout::kReplicateCode);
    }
  }
  absl::InlinedVector<int64_t, 8> key = {static_cast<int64_t>(partials.bits())};
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    key.push_back(GroupSize(orders.of(d)));
  }
  auto [it, inserted] = permute_classes_.try_emplace(key);
  PermuteClass& members = it->second;
  if (!inserted) return members;
  members.layouts.reserve(16);
  absl::InlinedVector<int64_t, 8> parts_left(key.begin() + 1, key.end());
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    if (global_shape_[d] % parts_left[d] != 0) members.uneven = true;
  }
  // Every assignment of the non-Partial mesh dims to a tensor dim or to
  // Replicate (-1) that splits each tensor dim into as many blocks as
  // `state`, in every nesting order.
  MeshDimList free_dims;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    if (!state.is_partial(m)) free_dims.push_back(m);
  }
  MeshDimList assignment(free_dims.size());
  AddAssignments(free_dims, free_dims.size(), absl::MakeSpan(assignment),
                 absl::MakeSpan(parts_left), partials, &members.layouts);
  return members;
}

MeshDimList PlanSearch::MovedMeshDims(PlannerLayout from,
                                      PlannerLayout to) const {
  // A mesh dim of size > 1 keeps its coordinate's meaning when it splits the
  // same tensor dim at the same depth, not counting mesh dims of size 1
  // (their chunk is everything); ranks then exchange only along the others.
  const PlannerLayout effective_from = Effective(from);
  const PlannerLayout effective_to = Effective(to);
  MeshDimList moved;
  for (int64_t m = 0; m < mesh_ndim_; ++m) {
    if (mesh_shape_[m] == 1 || from.is_partial(m)) continue;
    if (effective_from.code(m) != effective_to.code(m)) moved.push_back(m);
  }
  return moved;
}

void PlanSearch::ExpandPermutes(int node, const ShardOrders& orders) {
  const PlannerLayout state = nodes_[node].state;
  // On uniform links with no mesh dim of size 1, a permute's cost depends
  // only on the bytes held before it: once a member of a class has been
  // expanded, a later one with no lower cost and no fewer bytes would
  // improve nothing.
  PermuteClass& members = PermuteClassOf(state, orders);
  const double cost = nodes_[node].cost;
  if (uniform_permute_costs_) {
    for (const auto& [done_cost, done_bytes] : members.expanded) {
      if (done_cost <= cost && done_bytes <= local_bytes_) return;
    }
    members.expanded.emplace_back(cost, local_bytes_);
  }
  for (PlannerLayout member : members.layouts) {
    if (member == state ||
        (members.uneven && !HoldsSameBlocks(orders, member))) {
      continue;
    }
    const MeshDimList moved = MovedMeshDims(state, member);
    Relax(node, member, MakeStep(CommKind::kPermute, moved), moved, {});
  }
}

void PlanSearch::Expand(int node) {
  const PlannerLayout state = nodes_[node].state;
  partial_ops_ = {ReduceOp::kSum};
  for (PlannerLayout layout : {state, to_}) {
    for (int64_t m = 0; m < mesh_ndim_; ++m) {
      if (layout.is_partial(m) &&
          std::find(partial_ops_.begin(), partial_ops_.end(),
                    layout.reduce_op(m)) == partial_ops_.end()) {
        partial_ops_.push_back(layout.reduce_op(m));
      }
    }
  }
  const ShardOrders orders(state, mesh_ndim_, tensor_rank_);
  local_bytes_ = LocalBytes(orders);
  ExpandGathers(node, orders);
  ExpandAllToAlls(node, orders);
  ExpandPartials(node, orders);
  ExpandLocal(node, orders);
  ExpandPermutes(node, orders);
}

RedistributePlan PlanSearch::Run(const Sharding& from) {
  const PlannerLayout start = PlannerLayout::Pack(from);
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
    Expand(node);
  }
  RedistributePlan plan;
  if (goal < 0) return plan;  // Unreachable: CheckRedistribution passed.
  Sharding after = to_.Unpack(mesh_ndim_, tensor_rank_);
  for (int n = goal; nodes_[n].parent >= 0; n = nodes_[n].parent) {
    const Node& to = nodes_[n];
    RedistributeStep step;
    step.kind = to.kind;
    step.mesh_dims.assign(to.mesh_dims.begin(),
                          to.mesh_dims.begin() + to.num_mesh_dims);
    step.tensor_dims.assign(to.tensor_dims.begin(),
                            to.tensor_dims.begin() + to.num_tensor_dims);
    step.before = nodes_[to.parent].state.Unpack(mesh_ndim_, tensor_rank_);
    step.after = std::move(after);
    after = step.before;
    step.bytes_per_rank = CostModel::ReceivedBytes(
        to.kind, GroupSize(step.mesh_dims),
        PaddedLocalBytes(step.before, mesh_shape_, global_shape_, dtype_));
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
  if (!PlannerLayout::Fits(from.mesh_ndim(), from.tensor_rank())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot plan for a mesh of ", from.mesh_ndim(),
        " dims and a tensor of rank ", from.tensor_rank(),
        ": the planner supports at most ", PlannerLayout::kMaxMeshDims,
        " mesh dims and tensor rank ", PlannerLayout::kMaxTensorRank));
  }
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
