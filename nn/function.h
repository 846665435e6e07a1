#ifndef DTENSOR_NN_FUNCTION_H_
#define DTENSOR_NN_FUNCTION_H_

#include "absl/strings/string_view.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace nn {

// A differentiable function computed outside op dispatch, as a tape records
// it (GradientTape::RecordFunction): a name for errors and listings, and the
// gradients of its inputs from those of its outputs (like
// torch.autograd.Function). Redistributions and the moves between a mesh and
// a tp-local mesh are functions; ops (OpDef) are not.
// Requires: a recorded Function outlives the tapes that record it (make it a
// static); `backward` follows BackwardFn's contract (dtensor/ops/op_def.h): it
// gets the recorded inputs, arguments and outputs and the output gradients, and
// returns one gradient per input, of its input's shape and dtype (undefined
// where the input gets none); its errors are GradientTape::Gradient's,
// prefixed with `name`.
struct Function {
  absl::string_view name;
  BackwardFn backward;
  // Whether `backward` reads only its tensors' shardings (specs), never their
  // data, as a redistribution's does: then the tape does not rebuild
  // tensors recomputed in backward for it (GradientTape::RecomputeInBackward).
  bool backward_reads_specs_only = false;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_FUNCTION_H_
