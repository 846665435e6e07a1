#include "tests/dtensor/redistribution_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace reference {
namespace {

constexpr const char* kOpNames[] = {"sum", "avg", "max", "min"};

// The tensor dim that mesh dim m shards, or -1.
int ShardedDim(const ModelSharding& sharding, int m) {
  for (size_t d = 0; d < sharding.splits.size(); ++d) {
    const std::vector<int>& dims = sharding.splits[d];
    if (std::find(dims.begin(), dims.end(), m) != dims.end()) {
      return static_cast<int>(d);
    }
  }
  return -1;
}

int64_t GroupSize(const std::vector<int>& mesh_dims, const Network& network) {
  int64_t size = 1;
  for (int m : mesh_dims) size *= network.mesh_shape[m];
  return size;
}

// Range [offset, offset + size) of chunk i of k of an extent (torch.chunk).
void Chunk(int64_t extent, int64_t k, int64_t i, int64_t* offset,
           int64_t* size) {
  const int64_t chunk = (extent + k - 1) / k;
  const int64_t begin = std::min(i * chunk, extent);
  *offset += begin;
  *size = std::min(chunk, extent - begin);
}

// How many ranks hold each non-empty block, keyed by the rank's coordinates
// on the Partial mesh dims, then (offset, size) per tensor dim.
std::map<std::vector<int64_t>, int> HeldBlocks(const ModelSharding& sharding,
                                               const Problem& problem) {
  const std::vector<int64_t>& mesh = problem.network.mesh_shape;
  std::map<std::vector<int64_t>, int> held;
  std::vector<int64_t> coord(mesh.size(), 0);
  while (true) {
    std::vector<int64_t> key;
    for (size_t m = 0; m < mesh.size(); ++m) {
      if (sharding.partial_op[m] != kNotPartial) key.push_back(coord[m]);
    }
    bool empty = false;
    for (size_t d = 0; d < sharding.splits.size(); ++d) {
      int64_t offset = 0, size = problem.global_shape[d];
      for (int m : sharding.splits[d]) {
        Chunk(size, mesh[m], coord[m], &offset, &size);
      }
      key.push_back(offset);
      key.push_back(size);
      empty = empty || size == 0;
    }
    if (!empty) ++held[key];
    // Next coordinate, row-major.
    int m = static_cast<int>(mesh.size()) - 1;
    while (m >= 0 && ++coord[m] == mesh[m]) coord[m--] = 0;
    if (m < 0) break;
  }
  return held;
}

// Whether every block `to` needs is held by at least as many ranks in `from`.
bool PermuteServes(const ModelSharding& from, const ModelSharding& to,
                   const Problem& problem) {
  const std::map<std::vector<int64_t>, int> held = HeldBlocks(from, problem);
  for (const auto& [block, count] : HeldBlocks(to, problem)) {
    auto it = held.find(block);
    if (it == held.end() || it->second < count) return false;
  }
  return true;
}

// What mesh dim `m` does in `sharding`: the tensor dim it splits (-1 for none)
// and how many mesh dims of size > 1 split that tensor dim outside it.
std::pair<int, int> Role(const ModelSharding& sharding, int m,
                         const Problem& problem) {
  for (size_t d = 0; d < sharding.splits.size(); ++d) {
    int depth = 0;
    for (int other : sharding.splits[d]) {
      if (other == m) return {static_cast<int>(d), depth};
      if (problem.network.mesh_shape[other] > 1) ++depth;
    }
  }
  return {-1, 0};
}

// The mesh dims of size > 1 whose role differs between `from` and `to`:
// ranks that agree on every other mesh dim exchange blocks among themselves.
std::vector<int> ChangedRoles(const ModelSharding& from,
                              const ModelSharding& to, const Problem& problem) {
  std::vector<int> changed;
  for (size_t m = 0; m < from.partial_op.size(); ++m) {
    const int dim = static_cast<int>(m);
    if (problem.network.mesh_shape[m] == 1) continue;
    if (Role(from, dim, problem) != Role(to, dim, problem)) {
      changed.push_back(dim);
    }
  }
  return changed;
}

// Shardings that keep the Partial mesh dims of `like` and put every other mesh
// dim on Replicate or on a tensor dim, in every nesting order.
std::vector<ModelSharding> ShardingsWithPartials(const ModelSharding& like) {
  const int mesh_ndim = static_cast<int>(like.partial_op.size());
  const int rank = static_cast<int>(like.splits.size());
  std::vector<ModelSharding> result;
  ModelSharding current{std::vector<std::vector<int>>(rank), like.partial_op};
  // Mesh dims are placed in ascending order; each shard is inserted at every
  // position of its tensor dim, which yields every nesting order once.
  std::function<void(int)> place = [&](int m) {
    if (m == mesh_ndim) {
      result.push_back(current);
      return;
    }
    if (like.partial_op[m] != kNotPartial) return place(m + 1);
    place(m + 1);  // Replicate.
    for (int d = 0; d < rank; ++d) {
      std::vector<int>& dims = current.splits[d];
      for (size_t pos = 0; pos <= dims.size(); ++pos) {
        dims.insert(dims.begin() + pos, m);
        place(m + 1);
        dims.erase(dims.begin() + pos);
      }
    }
  };
  place(0);
  return result;
}

std::vector<int> Subset(const std::vector<int>& items, int mask) {
  std::vector<int> subset;
  for (size_t i = 0; i < items.size(); ++i) {
    if (mask & (1 << i)) subset.push_back(items[i]);
  }
  return subset;
}

ModelSharding WithoutShards(ModelSharding sharding, int d, size_t count) {
  sharding.splits[d].resize(sharding.splits[d].size() - count);
  return sharding;
}

ModelSharding WithShardsAppended(ModelSharding sharding, int d,
                                 const std::vector<int>& dims) {
  sharding.splits[d].insert(sharding.splits[d].end(), dims.begin(), dims.end());
  return sharding;
}

// Collects moves, turning steps over one rank into local ones and pricing
// each with the contract's formula.
class MoveList {
 public:
  MoveList(const ModelSharding& from, const Problem& problem)
      : problem_(problem), local_bytes_(PaddedBytes(from, problem)) {}

  void Add(CommKind kind, std::vector<int> mesh_dims,
           std::vector<int> tensor_dims, ModelSharding after) {
    if (GroupSize(mesh_dims, problem_.network) == 1) kind = CommKind::kLocal;
    Move move{kind, std::move(mesh_dims), std::move(tensor_dims),
              std::move(after)};
    move.received_bytes =
        ReceivedBytes(kind, move.mesh_dims, local_bytes_, problem_.network);
    move.cost_us =
        StepCostUs(kind, move.mesh_dims, local_bytes_, problem_.network);
    moves_.push_back(std::move(move));
  }
  std::vector<Move> Take() { return std::move(moves_); }

 private:
  const Problem& problem_;
  double local_bytes_;
  std::vector<Move> moves_;
};

bool Near(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

std::vector<int> ToInts(const std::vector<int64_t>& values) {
  return std::vector<int>(values.begin(), values.end());
}

// Whether `step` is `move` (see CheckPlan).
bool StepIsMove(const RedistributeStep& step, const ModelSharding& after,
                const Move& move) {
  if (move.kind != step.kind || move.after != after ||
      move.tensor_dims != ToInts(step.tensor_dims) ||
      !Near(move.received_bytes, step.bytes_per_rank) ||
      !Near(move.cost_us, step.cost_us)) {
    return false;
  }
  if (move.kind == CommKind::kPermute) return true;
  std::vector<int> mesh_dims = ToInts(step.mesh_dims);
  std::vector<int> expected = move.mesh_dims;
  if (move.kind == CommKind::kAllReduce) {
    std::sort(mesh_dims.begin(), mesh_dims.end());
    std::sort(expected.begin(), expected.end());
  }
  return mesh_dims == expected;
}

}  // namespace

bool ModelSharding::IsReplicate(int m) const {
  return partial_op[m] == kNotPartial && ShardedDim(*this, m) < 0;
}

std::string ModelSharding::ToText() const {
  std::vector<std::string> items;
  for (size_t m = 0; m < partial_op.size(); ++m) {
    if (partial_op[m] != kNotPartial) {
      items.push_back(absl::StrCat("P(", kOpNames[partial_op[m]], ")"));
      continue;
    }
    const int d = ShardedDim(*this, static_cast<int>(m));
    if (d < 0) {
      items.push_back("R");
      continue;
    }
    const std::vector<int>& dims = splits[d];
    const auto pos = std::find(dims.begin(), dims.end(), m) - dims.begin();
    items.push_back(absl::StrCat("S(", d, ")[", pos, "]"));
  }
  return absl::StrJoin(items, ",");
}

ModelSharding FromSharding(const Sharding& sharding) {
  ModelSharding model;
  for (int64_t d = 0; d < sharding.tensor_rank(); ++d) {
    const MeshDimList dims = sharding.MeshDimsSharding(d);
    model.splits.emplace_back(dims.begin(), dims.end());
  }
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    const Placement& p = sharding.placement(m);
    int op = kNotPartial;
    for (int i = 0; p.is_partial() && i < 4; ++i) {
      if (ReduceOpName(p.reduce_op()) == kOpNames[i]) op = i;
    }
    if (p.is_partial() && op == kNotPartial) {
      ADD_FAILURE() << "unknown reduce op " << p.ToString();
    }
    model.partial_op.push_back(op);
  }
  return model;
}

Sharding ParseShardingOrFail(const std::string& text, int64_t tensor_rank) {
  absl::StatusOr<Sharding> sharding = Sharding::Parse(text, tensor_rank);
  if (!sharding.ok()) {
    ADD_FAILURE() << "cannot parse '" << text << "': " << sharding.status();
    return Sharding();
  }
  return *sharding;
}

ModelSharding ParseModelSharding(const std::string& text, int tensor_rank) {
  return FromSharding(ParseShardingOrFail(text, tensor_rank));
}

std::vector<ModelSharding> AllModelShardings(
    int mesh_ndim, int tensor_rank, const std::vector<int>& partial_ops) {
  std::vector<ModelSharding> result;
  // Every choice of Partial op (or none) per mesh dim, then every placement
  // of the others.
  std::vector<int> ops(mesh_ndim, kNotPartial);
  std::function<void(int)> choose = [&](int m) {
    if (m == mesh_ndim) {
      ModelSharding like{std::vector<std::vector<int>>(tensor_rank), ops};
      for (ModelSharding& sharding : ShardingsWithPartials(like)) {
        result.push_back(std::move(sharding));
      }
      return;
    }
    ops[m] = kNotPartial;
    choose(m + 1);
    for (int op : partial_ops) {
      ops[m] = op;
      choose(m + 1);
    }
    ops[m] = kNotPartial;
  };
  choose(0);
  return result;
}

Network Network::Default(std::vector<int64_t> mesh_shape) {
  Network network;
  network.bandwidth_gbps.assign(mesh_shape.size(), 87.7);
  network.hop_us.assign(mesh_shape.size(), 0.6);
  network.mesh_shape = std::move(mesh_shape);
  return network;
}

double ReceivedBytes(CommKind kind, const std::vector<int>& mesh_dims,
                     double local_bytes, const Network& network) {
  const double n = static_cast<double>(GroupSize(mesh_dims, network));
  if (n == 1) return 0;
  switch (kind) {
    case CommKind::kAllGather:
      return (n - 1) * local_bytes;
    case CommKind::kReduceScatter:
    case CommKind::kAllToAll:
      return (n - 1) / n * local_bytes;
    case CommKind::kAllReduce:
      return 2 * (n - 1) / n * local_bytes;
    case CommKind::kPermute:
      return local_bytes;
    case CommKind::kLocal:
      return 0;
  }
  return 0;
}

double StepCostUs(CommKind kind, const std::vector<int>& mesh_dims,
                  double local_bytes, const Network& network) {
  const int64_t n = GroupSize(mesh_dims, network);
  if (kind == CommKind::kLocal || n == 1) return 0;
  double hops = static_cast<double>(n - 1);
  if (kind == CommKind::kAllReduce) hops = 2.0 * static_cast<double>(n - 1);
  if (kind == CommKind::kPermute) hops = 1;
  double bandwidth = network.bandwidth_gbps[mesh_dims[0]];
  double hop = network.hop_us[mesh_dims[0]];
  for (int m : mesh_dims) {
    bandwidth = std::min(bandwidth, network.bandwidth_gbps[m]);
    hop = std::max(hop, network.hop_us[m]);
  }
  const double seconds =
      ReceivedBytes(kind, mesh_dims, local_bytes, network) / (bandwidth * 1e9);
  return network.launch_us + hops * hop + seconds * 1e6;
}

double PaddedBytes(const ModelSharding& sharding, const Problem& problem) {
  double bytes = static_cast<double>(problem.element_bytes);
  for (size_t d = 0; d < sharding.splits.size(); ++d) {
    int64_t extent = problem.global_shape[d];
    for (int m : sharding.splits[d]) {
      const int64_t k = problem.network.mesh_shape[m];
      extent = (extent + k - 1) / k;
    }
    bytes *= static_cast<double>(extent);
  }
  return bytes;
}

std::string Move::ToString() const {
  return absl::StrCat(CommKindName(kind), " mesh_dims=[",
                      absl::StrJoin(mesh_dims, ","), "] tensor_dims=[",
                      absl::StrJoin(tensor_dims, ","), "] -> ", after.ToText(),
                      " (", cost_us, " us)");
}

std::vector<Move> Moves(const ModelSharding& from, const Problem& problem) {
  MoveList moves(from, problem);
  const int rank = static_cast<int>(from.splits.size());
  const int mesh_ndim = static_cast<int>(from.partial_op.size());
  // All-gathers and all-to-alls of the innermost `count` mesh dims of d.
  for (int d = 0; d < rank; ++d) {
    const std::vector<int>& dims = from.splits[d];
    for (size_t count = 1; count <= dims.size(); ++count) {
      std::vector<int> inner(dims.end() - count, dims.end());
      const ModelSharding gathered = WithoutShards(from, d, count);
      moves.Add(CommKind::kAllGather, inner, {d}, gathered);
      for (int e = 0; e < rank; ++e) {
        if (e == d) continue;
        std::vector<int> order = inner;
        if (problem.reordering_all_to_all) {
          std::sort(order.begin(), order.end());
        }
        do {
          moves.Add(CommKind::kAllToAll, inner, {d, e},
                    WithShardsAppended(gathered, e, order));
        } while (problem.reordering_all_to_all &&
                 std::next_permutation(order.begin(), order.end()));
      }
    }
  }
  // All-reduces and reduce-scatters of Partial mesh dims sharing an op.
  for (int op = 0; op < 4; ++op) {
    std::vector<int> partial;
    for (int m = 0; m < mesh_ndim; ++m) {
      if (from.partial_op[m] == op) partial.push_back(m);
    }
    for (int mask = 1; mask < (1 << partial.size()); ++mask) {
      std::vector<int> group = Subset(partial, mask);
      ModelSharding reduced = from;
      for (int m : group) reduced.partial_op[m] = kNotPartial;
      moves.Add(CommKind::kAllReduce, group, {}, reduced);
      do {
        for (int d = 0; d < rank; ++d) {
          moves.Add(CommKind::kReduceScatter, group, {d},
                    WithShardsAppended(reduced, d, group));
        }
      } while (std::next_permutation(group.begin(), group.end()));
    }
  }
  // Local slices and Replicate -> Partial.
  for (int m = 0; m < mesh_ndim; ++m) {
    if (!from.IsReplicate(m)) continue;
    for (int d = 0; d < rank; ++d) {
      moves.Add(CommKind::kLocal, {m}, {d}, WithShardsAppended(from, d, {m}));
    }
    // The problem's ops, plus every op a Partial mesh dim of `from` has.
    std::set<int> ops(problem.local_partial_ops.begin(),
                      problem.local_partial_ops.end());
    for (int op : from.partial_op) {
      if (op != kNotPartial) ops.insert(op);
    }
    for (int op : ops) {
      ModelSharding partial = from;
      partial.partial_op[m] = op;
      moves.Add(CommKind::kLocal, {m}, {}, partial);
    }
  }
  // Permutes, over the mesh dims whose role changes.
  for (ModelSharding& to : ShardingsWithPartials(from)) {
    if (to != from && PermuteServes(from, to, problem)) {
      std::vector<int> group = ChangedRoles(from, to, problem);
      moves.Add(CommKind::kPermute, std::move(group), {}, std::move(to));
    }
  }
  return moves.Take();
}

std::string CheckPlan(const RedistributePlan& plan, const ModelSharding& from,
                      const ModelSharding& to, const Problem& problem) {
  ModelSharding current = from;
  double total = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const RedistributeStep& step = plan.steps[i];
    const ModelSharding before = FromSharding(step.before);
    if (before != current) {
      return absl::StrCat("step ", i, " starts at ", before.ToText(),
                          ", not at ", current.ToText());
    }
    const ModelSharding after = FromSharding(step.after);
    bool found = false;
    std::vector<std::string> same_after;
    for (const Move& move : Moves(current, problem)) {
      if (StepIsMove(step, after, move)) found = true;
      if (move.after == after) same_after.push_back(move.ToString());
    }
    if (!found) {
      return absl::StrCat("step ", i, " (", step.ToString(),
                          ") is no contract move; the contract's moves from ",
                          current.ToText(), " to ", after.ToText(), ": [",
                          absl::StrJoin(same_after, "; "), "]");
    }
    total += step.cost_us;
    current = after;
  }
  if (current != to) {
    return absl::StrCat("the plan ends at ", current.ToText(), ", not at ",
                        to.ToText());
  }
  if (!Near(total, plan.total_cost_us)) {
    return absl::StrCat("the steps cost ", total, " us in all, the plan says ",
                        plan.total_cost_us);
  }
  return "";
}

}  // namespace reference
}  // namespace dtensor
