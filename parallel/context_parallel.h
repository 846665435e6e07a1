#ifndef DTENSOR_PARALLEL_CONTEXT_PARALLEL_H_
#define DTENSOR_PARALLEL_CONTEXT_PARALLEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/base/json_value.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/attention.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/sequence_blocks.h"

namespace dtensor {
namespace parallel {

// Context parallelism in a plan: the sequence of the activations is sharded
// over a mesh dim and every Attention module runs as ring attention over it
// (dtensor/ops/ring_attention.h); the rest of the model (norms, MLPs, the
// loss) follows from propagation on the sequence-sharded activations. A plan
// file writes
//   "context_parallel": {"mesh_dim": "cp", "order": "balanced"}
// ("mesh_dim" defaults to "cp", "order" to "balanced"; "contiguous" keeps the
// sequence in order, for any length). The trainer feeds the batch in that
// order, sharded on the sequence dim over the mesh dim
// (ContextParallelBatch).
struct ContextParallelPlan {
  std::string mesh_dim = "cp";
  ops::SequenceOrder order = ops::SequenceOrder::kBalanced;
};

// Parses the plan file's "context_parallel" value.
// Errors: not an object, unknown keys, a non-string value, an unknown order
// (InvalidArgument naming it).
absl::StatusOr<ContextParallelPlan> ParseContextParallel(
    const JsonValue& value);

// The index of the plan's mesh dim in `mesh`.
// Errors: a mesh without that dim (InvalidArgument naming the plan option and
// the mesh's dims).
absl::StatusOr<int64_t> ContextParallelDim(const DeviceMesh& mesh,
                                           const ContextParallelPlan& cp);

// What a plan's "context_parallel" does to a module tree, decided before the
// tree changes: every Attention module, and how it runs as ring attention.
struct ContextParallelTargets {
  nn::Attention::ContextParallel ring;
  std::vector<nn::Attention*> attentions;
};

// Every Attention module under `root`, to run as ring attention over the
// plan's mesh dim of `mesh` in the plan's order.
// Errors: those of ContextParallelDim; a tree without an Attention module.
absl::StatusOr<ContextParallelTargets> ResolveContextParallel(
    nn::Module& root, const DeviceMesh& mesh, const ContextParallelPlan& cp);

// Makes every target Attention module run as ring attention.
void ApplyContextParallel(const ContextParallelTargets& targets);

// `full` [batch, seq, ...] with its sequence (dim 1) in the plan's order over
// `ranks` ranks, as the model's inputs and targets must be fed.
// Errors: a balanced order whose length is not divisible by 2 * ranks.
absl::StatusOr<Tensor> ContextParallelBatch(const Tensor& full, int64_t ranks,
                                            const ContextParallelPlan& cp);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CONTEXT_PARALLEL_H_
