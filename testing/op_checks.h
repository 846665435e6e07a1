#ifndef DTENSOR_DTENSOR_TESTING_OP_CHECKS_H_
#define DTENSOR_DTENSOR_TESTING_OP_CHECKS_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/testing/op_cases.h"

// Drivers of the op family tests, on top of op_cases.h.
namespace dtensor {
namespace testing_util {

// One call of an op, in the two forms the family tests run it: through its
// typed function (`call`, e.g. ops::Softmax) and as the registry op `op`
// with `args`; `reference` computes it on the full inputs (undefined for an
// absent optional input).
struct OpCall {
  std::string op;
  std::vector<Tensor> inputs;
  OpArgs args;
  DTensorCall call;
  ReferenceCall reference;
  std::string description;
};

// Draws one call.
using OpCallMaker = std::function<OpCall(std::mt19937& rng)>;

// The property test over shardings: `rounds` random meshes (RandomMeshShape:
// 1-D to 3-D), `calls_per_mesh` calls each, every input in a RandomSharding
// (Partial with the ops its dtype allows), checked by CheckCases through the
// typed call. All drawn from `seed`.
absl::Status CheckOnRandomShardings(uint32_t seed, int rounds,
                                    int calls_per_mesh, const OpCallMaker& make,
                                    double rtol, double atol);

// The property test over strategies: `calls` random calls, each on a random
// mesh, checked by CheckEveryStrategy (at most `max_strategies` each).
absl::Status CheckRandomStrategies(uint32_t seed, int calls, int max_strategies,
                                   const OpCallMaker& make, double rtol,
                                   double atol);

// How much CheckOpProperties draws: sharding_rounds x calls_per_mesh calls
// for CheckOnRandomShardings, strategy_calls calls of at most max_strategies
// strategies each for CheckRandomStrategies.
struct OpPropertyCounts {
  int sharding_rounds = 4;
  int calls_per_mesh = 10;
  int strategy_calls = 16;
  int max_strategies = 24;
};

// Both property tests of one op, what most family tests run:
// CheckOnRandomShardings(seed) over `typed` (calls through the typed
// function), then CheckRandomStrategies(seed + 1000) over `registry` (calls
// of the registry op; `typed` when empty), every comparison within
// rtol = atol = `tol`. Runs both; the error names the failing test(s).
absl::Status CheckOpProperties(uint32_t seed, const OpCallMaker& typed,
                               double tol, const OpPropertyCounts& counts = {},
                               const OpCallMaker& registry = nullptr);

// One call of an op whose every strategy is to be checked: the full inputs
// (undefined for an absent optional input), the arguments and the reference.
struct StrategyCase {
  const OpDef* op = nullptr;
  std::vector<Tensor> inputs;
  OpArgs args;
  ReferenceCall reference;
  std::string description;
};

// Runs the op's kernel under every strategy the op offers for the call on a
// mesh of `mesh_shape` (those whose Partials the dtypes allow; at most
// `max_strategies`, drawn with `seed` when there are more), bypassing the
// cost-based choice: the inputs are laid out as the strategy says (Partial
// terms as in DistributeWithTerms), the kernel's outputs are wrapped in the
// strategy's output shardings, checked for their local shapes, gathered and
// compared with the reference. Returns the first failure, naming the case
// and the strategy.
absl::Status CheckEveryStrategy(const std::vector<int64_t>& mesh_shape,
                                const StrategyCase& c, int max_strategies,
                                uint32_t seed, double rtol, double atol);

// Adapters for ops with one output.
DTensorCall OneOutput(
    std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)> call);
ReferenceCall OneReference(
    std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)> call);

// One metadata-only input: its global shape, sharding (Sharding::Parse text)
// and dtype.
struct MetaInput {
  Shape shape;
  std::string sharding;
  DType dtype = DType::kF32;
};

// What one call did on metadata-only DTensors: its status, the first
// output's sharding (Sharding text) and the collectives counted.
struct MetaOutcome {
  absl::Status status;
  std::string sharding;
  CommCounter comms;
};

// Calls `call` on metadata-only DTensors of `inputs` (an undefined DTensor
// where the sharding is "-") on a mesh of `mesh_shape`, seen by rank 0.
MetaOutcome RunOnMeta(
    const std::vector<int64_t>& mesh_shape,
    const std::vector<MetaInput>& inputs,
    const std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)>&
        call);

}  // namespace testing_util
}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_TESTING_OP_CHECKS_H_
