#include "tools/explain_memory.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::StatusOr<int64_t> LocalBytes(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(ShardBlock block, x.LocalBlock());
  return block.numel() * static_cast<int64_t>(ElementSize(x.dtype()));
}

absl::StatusOr<MemoryEstimate> EstimateStepMemory(
    absl::Span<const DTensor> parameters, absl::Span<const DTensor> gradients,
    absl::Span<const nn::GradientTape::HeldTensor> held) {
  MemoryEstimate memory;
  absl::flat_hash_set<uint64_t> parameter_ids;
  for (const DTensor& p : parameters) {
    DT_ASSIGN_OR_RETURN(int64_t bytes, LocalBytes(p));
    memory.parameters += bytes;
    parameter_ids.insert(p.id());
  }
  memory.optimizer_state = 2 * memory.parameters;
  for (const DTensor& g : gradients) {
    if (!g.defined()) continue;
    DT_ASSIGN_OR_RETURN(int64_t bytes, LocalBytes(g));
    memory.gradients += bytes;
  }
  int64_t largest = 0;
  for (const nn::GradientTape::HeldTensor& h : held) {
    if (parameter_ids.contains(h.tensor.id())) continue;
    DT_ASSIGN_OR_RETURN(int64_t bytes, LocalBytes(h.tensor));
    largest = std::max(largest, bytes);
    if (!h.recomputed) memory.peak_activations += bytes;
  }
  memory.peak_activations += largest;
  return memory;
}

}  // namespace dtensor
