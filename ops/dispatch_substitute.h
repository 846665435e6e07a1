#ifndef DTENSOR_OPS_DISPATCH_SUBSTITUTE_H_
#define DTENSOR_OPS_DISPATCH_SUBSTITUTE_H_

#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {

// Substitutes the outputs of an op call without running it: activation
// checkpointing's selective recompute hands back the outputs forward kept
// (dtensor/nn/checkpoint.h). Called by Dispatch for every call on this
// thread before propagation; returning true with `outputs` filled (one per
// op output, the specs the call would give) skips the kernel, the inputs'
// redistributions and their counters; the dispatch observer still sees the
// call.
using DispatchSubstitute = bool (*)(const OpDef& op, OpOutputs& outputs);
// Installs `substitute` for the calling thread (null: none); returns the one
// it replaces.
DispatchSubstitute SetThreadDispatchSubstitute(DispatchSubstitute substitute);

}  // namespace dtensor

#endif  // DTENSOR_OPS_DISPATCH_SUBSTITUTE_H_
