#ifndef DTENSOR_DTENSOR_REDISTRIBUTE_EXECUTOR_H_
#define DTENSOR_DTENSOR_REDISTRIBUTE_EXECUTOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/redistribute/plan.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Runs `plan` on this rank (`groups.rank()`):
// `local` is its shard of a tensor of `global_shape` under the plan's first
// sharding; returns its shard under the last. Every rank of `mesh` must call it
// with the same plan. Collectives take pieces of unequal size where shards are
// uneven; local steps return views (no copy) where they can. Each step is
// recorded in the CommCounters active on this thread.
// Errors: this rank not in `mesh` (NotFound); a failed collective.
absl::StatusOr<Tensor> ExecuteRedistribution(
    const RedistributePlan& plan, const Tensor& local, const DeviceMesh& mesh,
    absl::Span<const int64_t> global_shape, ProcessGroups& groups);

// Records the plan's steps in the active CommCounters without running them
// (metadata-only mode).
void RecordRedistribution(const RedistributePlan& plan);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_REDISTRIBUTE_EXECUTOR_H_
