#ifndef DTENSOR_PARALLEL_PARALLELIZE_H_
#define DTENSOR_PARALLEL_PARALLELIZE_H_

#include "absl/status/status.h"
#include "mesh/device_mesh.h"
#include "nn/module.h"
#include "parallel/plan.h"

namespace dtensor {
namespace parallel {

// Applies `plan` to the initialized tree `root` whose parameters live on
// `mesh`: every parameter is re-laid out (SetSlot) and hooks that
// redistribute activations are added. On the tp dim (plan.tp_dim):
//   colwise    Linear weight [out,in] S(0), bias S(0); input -> R
//              (input_layouts), output as output_layouts if given (else the
//              propagated S(-1)). Embedding weight S(1).
//   rowwise    Linear weight S(1), bias R; input -> S(-1); output (partial)
//              -> output_layouts, default R (all-reduce; "S(1)" for
//              sequence parallel: reduce-scatter). Embedding weight S(0).
//   loss_parallel  as colwise, output kept S(-1) (vocab-sharded logits).
//   sequence_parallel  parameters R; input -> S(1) (sequence dim).
//   prepare_input / prepare_output  input/output -> the given layouts.
// Parameters of modules no entry names stay Replicate on the tp dim. On the
// dp dim (plan.dp_dim): "replicate" keeps parameters R (their gradients come
// back partial and are all-reduced when brought to the parameter layout);
// "fsdp" shards the parameter's dim 0 on the dp dim (all-gathered by the ops
// that use it, gradients reduce-scattered). Errors: those of ResolvePlan, a
// layout that does not parse (naming it), and failed redistributions.
absl::Status ParallelizeModule(nn::Module& root, const DeviceMesh& mesh,
                               const Plan& plan);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PARALLELIZE_H_
