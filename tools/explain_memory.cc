#include "tools/explain_memory.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::StatusOr<int64_t> LocalBytes(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(ShardBlock block, x.LocalBlock());
  return block.numel() * static_cast<int64_t>(ElementSize(x.dtype()));
}

absl::StatusOr<MemoryEstimate> EstimateStepMemory(
    absl::Span<const DTensor> parameters, absl::Span<const DTensor> gradients,
    absl::Span<const nn::GradientTape::HeldTensor> held,
    int64_t rebuilds_at_once) {
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
  // The recomputed tensors rebuilt together (an FSDP group's parameters),
  // by group; one without a group is rebuilt alone.
  absl::flat_hash_map<const void*, int64_t> group_bytes;
  std::vector<int64_t> rebuilds;
  for (const nn::GradientTape::HeldTensor& h : held) {
    if (parameter_ids.contains(h.tensor.id())) continue;
    DT_ASSIGN_OR_RETURN(int64_t bytes, LocalBytes(h.tensor));
    if (!h.recomputed) {
      largest = std::max(largest, bytes);
      memory.peak_activations += bytes;
    } else if (h.rebuild_group != nullptr) {
      group_bytes[h.rebuild_group] += bytes;
    } else {
      rebuilds.push_back(bytes);
    }
  }
  for (const auto& [group, bytes] : group_bytes) rebuilds.push_back(bytes);
  std::sort(rebuilds.begin(), rebuilds.end(), std::greater<int64_t>());
  int64_t in_flight = 0;
  for (int64_t i = 0; i < std::min<int64_t>(rebuilds_at_once, rebuilds.size());
       ++i) {
    in_flight += rebuilds[i];
  }
  memory.peak_activations += std::max(largest, in_flight);
  return memory;
}

}  // namespace dtensor
