#ifndef DTENSOR_TOOLS_EXPLAIN_MEMORY_H_
#define DTENSOR_TOOLS_EXPLAIN_MEMORY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/autograd.h"

namespace dtensor {

// One rank's memory during a training step with AdamW, in bytes
// (docs/explain.md, "Memory per rank").
struct MemoryEstimate {
  // The rank's blocks of the parameters.
  int64_t parameters = 0;
  // Of the gradients, in the layouts backward returns them in.
  int64_t gradients = 0;
  // AdamW's two moments, each in its parameter's layout and dtype.
  int64_t optimizer_state = 0;
  // What the tape keeps at the end of forward (every recorded input and
  // output but the parameters, each once, views counted as copies; tensors
  // recomputed in backward excluded) plus the transient that coexists with
  // them in backward: the largest of those tensors (a gradient as large as
  // the largest activation), or the tensors rebuilt at once (FSDP: the
  // gathered parameters of the group computing, its gradients until they are
  // reduce-scattered and, with prefetch, the group prefetched: the
  // `rebuilds_at_once` largest rebuild groups).
  int64_t peak_activations = 0;

  int64_t total() const {
    return parameters + gradients + optimizer_state + peak_activations;
  }
};

// One device's memory against its capacity (`dtensor explain
// --device-memory`): each rank is one device, whose peak is the rank's
// MemoryEstimate::total().
struct DeviceFit {
  int64_t capacity = 0;
  int64_t peak = 0;

  // Negative when the peak exceeds the capacity.
  int64_t headroom() const { return capacity - peak; }
  bool fits() const { return peak <= capacity; }
};

// The bytes of x's local block on its runtime's rank (metadata-only too).
absl::StatusOr<int64_t> LocalBytes(const DTensor& x);

// The estimate from a step's parameters, the gradients backward returned,
// the tensors the tape held at the end of forward
// (GradientTape::HeldTensors), and how many rebuild groups' worth backward
// holds at once (FSDP: 3 with prefetch, 2 without; else 1). Errors:
// LocalBytes'.
absl::StatusOr<MemoryEstimate> EstimateStepMemory(
    absl::Span<const DTensor> parameters, absl::Span<const DTensor> gradients,
    absl::Span<const nn::GradientTape::HeldTensor> held,
    int64_t rebuilds_at_once);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_EXPLAIN_MEMORY_H_
