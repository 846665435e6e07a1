#ifndef DTENSOR_OPS_STRATEGY_H_
#define DTENSOR_OPS_STRATEGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/placement.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The global shape and dtype of an op's output.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::kF32;

  friend bool operator==(const TensorMeta& a, const TensorMeta& b) {
    return a.shape == b.shape && a.dtype == b.dtype;
  }
};

// A collective the kernel itself runs (the max and sum reductions of loss
// parallel, for example): its kind, the mesh dims of its group, and the bytes
// each rank holds before it. Costed by the mesh's cost model and recorded in
// the active CommCounters like a redistribution step.
struct KernelComm {
  CommKind kind = CommKind::kAllReduce;
  std::vector<int64_t> mesh_dims;
  double local_bytes = 0;

  friend bool operator==(const KernelComm& a, const KernelComm& b) {
    return a.kind == b.kind && a.mesh_dims == b.mesh_dims &&
           a.local_bytes == b.local_bytes;
  }
};

// One way to run an op on a mesh: the sharding every input must have (an empty
// Sharding for an absent optional input), the sharding every output then has,
// and the collectives the kernel runs itself (none for most ops).
struct OpStrategy {
  absl::InlinedVector<Sharding, 3> inputs;
  absl::InlinedVector<Sharding, 1> outputs;
  std::vector<KernelComm> kernel_comms;

  // "[S(0)] [R] -> [S(0)]": the inputs' shardings, then the outputs'.
  std::string ToString() const;

  friend bool operator==(const OpStrategy& a, const OpStrategy& b) {
    return a.inputs == b.inputs && a.outputs == b.outputs &&
           a.kernel_comms == b.kernel_comms;
  }
};

// What a strategy generator sees: the inputs' global specs (null for an
// absent optional input), the call's arguments, the outputs' shapes and
// dtypes (from the op's InferFn) and the mesh.
struct StrategyContext {
  absl::Span<const DTensorSpec* const> inputs;
  const OpArgs& args;
  absl::Span<const TensorMeta> outputs;
  const DeviceMesh& mesh;
  std::vector<int64_t> mesh_shape;
};

// The placements of every input and output on one mesh dim, plus the
// collectives the kernel then runs over it (their mesh_dims left empty: the
// combination fills in the mesh dim).
struct DimStrategy {
  absl::InlinedVector<Placement, 3> inputs;
  absl::InlinedVector<Placement, 1> outputs;
  std::vector<KernelComm> kernel_comms;
};

// Marks a tensor dim that iterates no loop dim (a size-1 dim broadcast
// against a larger one, a kept reduced dim): it is never sharded.
inline constexpr int kNoLoop = -1;

// The einsum view of an op: per input, then per output, per tensor dim, the
// loop dim it iterates. Tensor dims on the same loop dim have the same extent
// and are split into the same blocks, so every tensor having loop dim l must
// be sharded on it by the same mesh dims in the same nesting order. Absent
// inputs have an empty list.
struct LoopDims {
  std::vector<std::vector<int>> inputs;
  std::vector<std::vector<int>> outputs;
};

// Whether a Partial(op) tensor of `dtype` can be reduced: avg needs a
// floating dtype, sum and avg are not for bool.
bool PartialAllowed(ReduceOp op, DType dtype);
// Whether every Partial of `sharding` can reduce `dtype` (PartialAllowed):
// the engine drops the strategies where one cannot.
bool PartialsAllowed(const Sharding& sharding, DType dtype);

// The strategies over the whole mesh from per-mesh-dim candidates:
// `candidates[m]` lists the options of mesh dim m, and every combination
// (one option per mesh dim) is a strategy. Options that cannot be valid on
// their mesh dim are dropped before combining (the engine would drop every
// strategy made with them): an input Partial that the input's placement
// cannot become (it is Shard or another Partial), a Partial the tensor's
// dtype cannot reduce. Where several mesh dims shard one
// loop dim, their nesting order is one an input already has on that loop dim
// (restricted to those mesh dims, the others appended ascending), or the
// default (ascending): one strategy per distinct order, so that an input
// keeps its sharding where it can. Errors: a candidate sharding a tensor dim
// that iterates no loop dim, tensors sharing a loop dim sharded differently
// (a generator bug), or more than kMaxStrategies combinations.
absl::StatusOr<std::vector<OpStrategy>> CombineMeshDims(
    const StrategyContext& ctx,
    absl::Span<const std::vector<DimStrategy>> candidates,
    const LoopDims& loops);

// The most strategies CombineMeshDims enumerates for one call.
inline constexpr int64_t kMaxStrategies = int64_t{1} << 16;

}  // namespace dtensor

#endif  // DTENSOR_OPS_STRATEGY_H_
