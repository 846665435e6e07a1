#ifndef DTENSOR_TESTS_DTENSOR_REDISTRIBUTION_REFERENCE_H_
#define DTENSOR_TESTS_DTENSOR_REDISTRIBUTION_REFERENCE_H_

// An independent model of redistribution for the planner tests, written from
// the contract (not from the planner): its own sharding representation,
// its own cost formula, its own move generator. The planner's steps and costs
// are checked against it; it never calls the planner.

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/plan.h"
#include "dtensor/sharding.h"

namespace dtensor {
namespace reference {

// Reduce ops are coded as in the contract's list: 0 sum, 1 avg, 2 max, 3 min.
constexpr int kNotPartial = -1;

// A model sharding: per tensor dim the mesh dims that split it, outermost
// first, and per mesh dim its Partial op (kNotPartial unless Partial).
struct ModelSharding {
  std::vector<std::vector<int>> splits;
  std::vector<int> partial_op;

  friend bool operator==(const ModelSharding& a, const ModelSharding& b) {
    return a.splits == b.splits && a.partial_op == b.partial_op;
  }
  friend bool operator!=(const ModelSharding& a, const ModelSharding& b) {
    return !(a == b);
  }
  friend bool operator<(const ModelSharding& a, const ModelSharding& b) {
    return a.splits != b.splits ? a.splits < b.splits
                                : a.partial_op < b.partial_op;
  }
  // Whether mesh dim m shards no tensor dim and is not Partial.
  bool IsReplicate(int m) const;
  // Placements with explicit nesting positions, e.g. "S(0)[1],S(0)[0],P(sum)",
  // in the syntax of Sharding::Parse.
  std::string ToText() const;
};

// The model of a parsed Sharding (read through its accessors).
ModelSharding FromSharding(const Sharding& sharding);
// Parses `text` with Sharding::Parse, then reads it back: the test's way of
// writing shardings. Fails the calling test (and returns {}) on a parse error.
ModelSharding ParseModelSharding(const std::string& text, int tensor_rank);
// Sharding::Parse of `text`: the planner tests' way of writing shardings.
// Fails the calling test (and returns Sharding()) on a parse error.
Sharding ParseShardingOrFail(const std::string& text, int64_t tensor_rank);

// Every sharding of a tensor of `tensor_rank` dims on `mesh_ndim` mesh dims
// whose mesh dims are Replicate, Shard (in every nesting order) or Partial with
// one of `partial_ops`.
std::vector<ModelSharding> AllModelShardings(
    int mesh_ndim, int tensor_rank, const std::vector<int>& partial_ops);

// The network of the contract's cost model.
struct Network {
  std::vector<int64_t> mesh_shape;
  std::vector<double> bandwidth_gbps;  // Per mesh dim; 1 GB = 1e9 bytes.
  std::vector<double> hop_us;          // Per mesh dim.
  double launch_us = 6.6;

  // 87.7 GB/s and 0.6 us on every mesh dim.
  static Network Default(std::vector<int64_t> mesh_shape);
};

// The contract's cost of one `kind` step over the flattened group of
// `mesh_dims` when every rank holds `local_bytes` before it:
// launch + hops * hop + received / bandwidth, 0 for local steps and groups of
// one rank.
double StepCostUs(CommKind kind, const std::vector<int>& mesh_dims,
                  double local_bytes, const Network& network);
// Bytes each rank receives in that step (0 for local ones).
double ReceivedBytes(CommKind kind, const std::vector<int>& mesh_dims,
                     double local_bytes, const Network& network);

// What is being redistributed.
struct Problem {
  Network network;
  std::vector<int64_t> global_shape;
  int64_t element_bytes = 4;
  // The ops a local Replicate -> Partial step may introduce, besides those of
  // the sharding's own Partial mesh dims.
  std::vector<int> local_partial_ops = {0};
  // Whether an all-to-all may append the mesh dims it moves in any order (one
  // exchange over the same group) rather than only in their old order.
  bool reordering_all_to_all = true;
};

// Bytes of the largest local block: every tensor dim's extent divided,
// rounding up, by each mesh dim that splits it, in nesting order.
double PaddedBytes(const ModelSharding& sharding, const Problem& problem);

// One step of the contract's step list.
struct Move {
  CommKind kind = CommKind::kLocal;
  std::vector<int> mesh_dims;
  std::vector<int> tensor_dims;
  ModelSharding after;
  double received_bytes = 0;
  double cost_us = 0;

  std::string ToString() const;
};

// Every step the contract allows from `from`: all-gather of the innermost
// mesh dims of a tensor dim; local slice of a Replicate mesh dim (appended
// innermost); all-to-all of the innermost mesh dims of a tensor dim to the
// innermost position of another (in their order, or in any order with
// problem.reordering_all_to_all); all-reduce of Partial mesh dims with one op;
// reduce-scatter of them, in any order, into the innermost position of a tensor
// dim; local Replicate -> Partial(op) on any Replicate mesh dim, for the ops of
// problem.local_partial_ops and of the Partial mesh dims of `from`; a permute
// to any other sharding with the same Partial mesh dims whose non-empty blocks
// (per coordinate on the Partial mesh dims) are all held by at least as many
// ranks before (blocks computed here with the torch.chunk rule). A permute's
// group is the mesh dims of size > 1 whose role (tensor dim split, depth among
// the mesh dims of size > 1 splitting it) changes.
// Steps over a group of one rank are local.
std::vector<Move> Moves(const ModelSharding& from, const Problem& problem);

// Checks `plan` step by step against the contract: the steps chain from
// `from` to `to` through their `before`/`after` shardings; each is one of
// Moves(before) with the same kind, after-sharding, tensor dims, mesh dims (any
// order for an all-reduce; not compared for a permute), received bytes and
// cost (relative tolerance 1e-9); the total is the sum of the step costs.
// Returns "" when it passes, else what is wrong.
std::string CheckPlan(const RedistributePlan& plan, const ModelSharding& from,
                      const ModelSharding& to, const Problem& problem);

}  // namespace reference
}  // namespace dtensor

#endif  // DTENSOR_TESTS_DTENSOR_REDISTRIBUTION_REFERENCE_H_
