#ifndef DTENSOR_DTENSOR_REDISTRIBUTE_PLAN_H_
#define DTENSOR_DTENSOR_REDISTRIBUTE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/redistribute/cost_model.h"
#include "dtensor/sharding.h"

namespace dtensor {

// One step of a redistribution: a collective over the flattened group of
// `mesh_dims` (ordered outermost first: the group's ranks are ordered
// row-major over these mesh dims in this order), or a local step.
//
// What `tensor_dims` holds, by kind:
//   all_gather      {d}: the innermost mesh dims of tensor dim d are gathered;
//   reduce_scatter  {d}: partial mesh dims are reduced and scattered as the
//                   innermost shards of d;
//   all_to_all      {from, to}: the innermost mesh dims of `from` become the
//                   innermost shards of `to` (`mesh_dims` in their order on
//                   `from`; `after` gives their order on `to`);
//   local           {d} for a slice (Replicate -> innermost shard of d), {} for
//                   Replicate -> Partial or a step over a group of one rank;
//   all_reduce, permute: {}.
struct RedistributeStep {
  CommKind kind = CommKind::kLocal;
  std::vector<int64_t> mesh_dims;
  std::vector<int64_t> tensor_dims;
  Sharding before;
  Sharding after;
  // Bytes each rank receives (the padded local bytes of the cost model).
  double bytes_per_rank = 0;
  double cost_us = 0;

  // "all_gather mesh_dims=[1] tensor_dims=[0]: S(0),S(0) -> S(0),R".
  std::string ToString() const;
};

// A sequence of steps from one sharding to another, with its total cost.
struct RedistributePlan {
  std::vector<RedistributeStep> steps;
  double total_cost_us = 0;

  // Steps that move data between ranks (every kind but local).
  int64_t num_collectives() const;
  // One step per line, then the total.
  std::string ToString() const;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_REDISTRIBUTE_PLAN_H_
