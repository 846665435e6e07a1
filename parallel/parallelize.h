#ifndef DTENSOR_PARALLEL_PARALLELIZE_H_
#define DTENSOR_PARALLEL_PARALLELIZE_H_

#include "absl/status/status.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/plan.h"

namespace dtensor {
namespace parallel {

// Applies `plan` to the initialized tree `root` whose parameters live on
// `mesh`: every parameter is re-laid out (SetSlot) and hooks that
// redistribute activations are added. On the tp dim (plan.tp_dim) each
// entry's ParallelStyle (dtensor/parallel/parallel_style.h) decides: its
// ParameterPlacement for each parameter slot of the module (a parameter key
// places its parameter alone and adds no hook), and its Hooks: the input
// (a tp-local input first wrapped by local_input) redistributed to `input`,
// the output (a tp-local output first wrapped by local_output) to `output`,
// then handed on as its tp-local value when use_local_output (see
// dtensor/parallel/tp_local.h). The built-in styles' shardings:
//   colwise    Linear weight [out,in] S(0), bias S(0); input -> R; output as
//              output_layouts if given (else the propagated S(-1)).
//              Embedding weight S(1).
//   rowwise    Linear weight S(1), bias R; input -> S(-1); output (partial)
//              -> output_layouts, default R (all-reduce; "S(1)" for
//              sequence parallel: reduce-scatter). Embedding weight S(0).
//   loss_parallel  as colwise, output kept S(-1) (vocab-sharded logits; a
//              loss computed under ops::LossParallelScope keeps them so).
//   sequence_parallel  parameters R; input -> input_layouts, default S(1).
//   prepare_input / prepare_output  input/output -> the given shardings.
// and Hugging Face's names (docs/parallel.md).
// Parameters of modules no entry names stay Replicate on the tp dim. On the
// dp dim (plan.dp_dim): "replicate" keeps parameters R (their gradients come
// back partial and are all-reduced when brought to the parameter sharding);
// "fsdp" shards dim 0 of every parameter of rank >= 1 on the dp dim, inside
// the tp shard when tp shards dim 0 too, and gives every module that owns
// parameters a pre-forward hook that all-gathers them on dp (one
// redistribution each, declared GradientTape::RecomputeInBackward) and an
// exit hook that puts the sharded parameters back in the slots, so the
// gathered copies are freed when the call returns (even with an error);
// backward gathers
// again and reduce-scatters the gradients. Parameter DTensors (ids) taken
// from the slots after this call stay valid. Every decision is taken first
// by ResolvePlan (dtensor/parallel/plan_resolution.h), which this applies.
// With plan.mixed_precision, FSDP gathers in its param_dtype and
// AddMixedPrecisionHooks (dtensor/parallel/mixed_precision.h) installs the
// policy's casts after every other hook; a policy with a dtype other than
// f32 and bf16 fails first (the tree is then left as it was).
// Errors: those of ResolvePlan (the tree is then left as it was), and failed
// redistributions. A layout that fails later, at a forward (an
// output_layouts dim the output does not have), is an error naming the
// module, its style and the option.
absl::Status ParallelizeModule(nn::Module& root, const DeviceMesh& mesh,
                               const Plan& plan);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PARALLELIZE_H_
