#ifndef DTENSOR_NN_FUNCTION_H_
#define DTENSOR_NN_FUNCTION_H_

#include "absl/strings/string_view.h"
#include "ops/op_def.h"

namespace dtensor {
namespace nn {

// A differentiable function computed outside op dispatch, as a tape records
// it (GradientTape::RecordFunction): a name for errors and listings, and the
// gradients of its inputs from those of its outputs (like
// torch.autograd.Function). Redistributions and the moves between a mesh and
// a tp-local mesh are functions; ops (OpDef) are not.
struct Function {
  absl::string_view name;
  BackwardFn backward;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_FUNCTION_H_
