#ifndef DTENSOR_OPS_DISPATCH_H_
#define DTENSOR_OPS_DISPATCH_H_

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {

// The DTensors an op call returns, one per output.
using OpOutputs = absl::InlinedVector<DTensor, 1>;

// Runs `op` on DTensors (SPMD: every rank of the mesh makes the same call):
// looks the call up in the propagation cache (PropagationCache::Shared(),
// propagating on a miss), redistributes the inputs that the chosen strategy
// needs in another sharding, runs the kernel on the local shards and returns
// the outputs in the strategy's shardings. Under a metadata-only runtime it
// only records the redistributions' and the kernel's collectives in the
// active CommCounters and returns DTensors without data. Ops dispatched while
// an OpCounter is active are recorded with their outputs' local bytes.
//
// `inputs` holds one entry per op input; null or an undefined DTensor marks
// an absent optional input, and trailing absent ones may be left out. The
// inputs must share one runtime and one mesh. Errors: Propagate's, the
// redistributions', the kernel's, inputs from different runtimes.
absl::StatusOr<OpOutputs> Dispatch(const OpDef& op,
                                   absl::Span<const DTensor* const> inputs,
                                   const OpArgs& args);

// Sees every op call dispatched on this thread, after it succeeded: the op,
// the inputs as given to Dispatch, the arguments and the outputs (autograd's
// tape records calls through it: dtensor/nn/autograd.h).
using DispatchObserver = void (*)(const OpDef& op,
                                  absl::Span<const DTensor* const> inputs,
                                  const OpArgs& args,
                                  absl::Span<const DTensor> outputs);
// Installs `observer` for the calling thread (null: none); returns the one it
// replaces.
DispatchObserver SetThreadDispatchObserver(DispatchObserver observer);

// Dispatch for an op with one output.
absl::StatusOr<DTensor> DispatchOne(const OpDef& op,
                                    absl::Span<const DTensor* const> inputs,
                                    const OpArgs& args);

}  // namespace dtensor

#endif  // DTENSOR_OPS_DISPATCH_H_
