#ifndef DTENSOR_OPS_PROPAGATION_H_
#define DTENSOR_OPS_PROPAGATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/ops/strategy.h"
#include "dtensor/redistribute/plan.h"
#include "dtensor/runtime.h"

namespace dtensor {

// How one input of a call reaches the sharding its strategy needs.
struct InputRedistribution {
  // The spec the input arrives with and the one the kernel gets (the same
  // pointer when the sharding is kept); both null for an absent input.
  std::shared_ptr<const DTensorSpec> from;
  std::shared_ptr<const DTensorSpec> to;
  // The planner's plan from `from` to `to`; null when the sharding is kept.
  std::shared_ptr<const RedistributePlan> plan;

  double cost_us() const { return plan == nullptr ? 0 : plan->total_cost_us; }
};

// The outcome of propagating one op call: the chosen strategy, how every
// input gets there, the outputs' specs and the estimated cost. Immutable once
// built; the propagation cache shares it between every dispatch that hits.
struct Propagation {
  const OpDef* op = nullptr;
  OpStrategy strategy;
  // One per input of the op (absent ones included).
  std::vector<InputRedistribution> inputs;
  std::vector<std::shared_ptr<const DTensorSpec>> outputs;
  // The strategy's kernel collectives as CommCounter events.
  std::vector<CommCounter::Event> kernel_events;
  // The inputs' redistributions plus the kernel's collectives: what the call
  // spends (the choice also weighed completing Partial outputs).
  double cost_us = 0;
  // How many strategies were generated, and how many were valid.
  int64_t num_strategies = 0;
  int64_t num_valid_strategies = 0;

  // Collectives of every kind but local, redistributions and kernel.
  int64_t num_collectives() const;
  // Several lines: the strategy, each input's redistribution, the outputs,
  // the cost.
  std::string ToString() const;
};

// Whether `a` and `b` are the same mesh, cheaply (no allocation): the same
// names, rank list and layout. It may call two equal meshes written with
// different layouts unequal, never two different meshes equal.
bool SameMesh(const DeviceMesh& a, const DeviceMesh& b);

// Propagates one call of `op` with inputs of the given specs (null for an
// absent optional input; the trailing absent ones may be left out) and
// arguments, without the cache: every strategy is generated, those the
// inputs cannot reach (Shard -> Partial, Partial(a) -> Partial(b)) or whose
// Partials the dtypes cannot reduce are dropped, and the one with the least
// cost wins:
//
//   cost = sum over inputs of the planner's cost of redistributing it
//          (runtime.planner(), runtime.CostModelFor(mesh); plans are cached)
//        + the cost of the kernel's own collectives
//        + for each Partial output but the saved ones, the planner's cost of
//          completing it on the mesh dims where the strategy redistributes an
//          input with a collective or where every input is Replicate
//          (docs/ops.md, "The cost rule"; not part of Propagation::cost_us).
//
// Ties (within 1e-9 relative) go to the strategy with the fewest Partial
// outputs, then to the one that redistributes the fewest inputs, then to the
// fewest redistribution steps, then to the first generated.
// Errors: (each naming the op) a wrong number of inputs, a required input
// absent, inputs on different meshes, arguments that do not match the
// schema, the op's own shape and dtype errors, no valid strategy.
//
// `owners`, when given, holds for each input the shared pointer owning its
// spec (or null): the result then refers to those spec objects instead of
// copies, so that a cache comparing later calls' specs finds them equal by
// address.
absl::StatusOr<std::shared_ptr<const Propagation>> Propagate(
    const OpDef& op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args, const Runtime& runtime,
    absl::Span<const std::shared_ptr<const DTensorSpec>* const> owners = {});

}  // namespace dtensor

#endif  // DTENSOR_OPS_PROPAGATION_H_
