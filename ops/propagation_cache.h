#ifndef DTENSOR_OPS_PROPAGATION_CACHE_H_
#define DTENSOR_OPS_PROPAGATION_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/ops/propagation.h"
#include "dtensor/runtime.h"

namespace dtensor {

// Propagate's results keyed by (op, input specs, the arguments' key, and the
// cost model where the runtime has set links): a hit returns the shared
// propagation (strategy, redistribution plans, output specs) without
// generating or costing anything. The key is hashed without allocating: the
// specs' shardings, shapes and dtypes and a few words of their meshes; equality
// is exact: the same spec object (the cheap case: op outputs and DTensors
// passed again share the spec objects the cache holds), or an equal sharding,
// shape, dtype and mesh.
// Results do not depend on the calling rank, so one cache serves every rank
// of a process. Thread-safe; a hit takes a reader lock.
class PropagationCache {
 public:
  // Beyond this many entries the cache is emptied before the next insert.
  static constexpr int64_t kMaxEntries = int64_t{1} << 16;

  // The cache shared by the whole process.
  static PropagationCache& Shared();

  // The propagation of the call (inputs and owners as for Propagate), from
  // the cache or computed and cached. Ops are told apart by address.
  // Requires: `op` outlives the cache (registered OpDefs live as long as the
  // process); when `owners` is given it has an entry per input.
  // Errors: Propagate's (errors are not cached: a failing call is
  // propagated again each time).
  absl::StatusOr<std::shared_ptr<const Propagation>> Get(
      const OpDef& op, absl::Span<const DTensorSpec* const> inputs,
      const OpArgs& args, const Runtime& runtime,
      absl::Span<const std::shared_ptr<const DTensorSpec>* const> owners = {});

  // Drops every entry (the propagations stay alive while DTensors use them).
  // Safe while other threads call Get: their next calls miss.
  void Clear();
  int64_t size() const;
  // Calls that were not hits (since construction; Clear keeps the count).
  int64_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::shared_ptr<const Propagation> propagation;
    OpArgs args;
    // Set when the runtime had links: the cost model the result was
    // chosen with.
    std::optional<CostModel> links;
  };

  static bool Matches(const Entry& entry, const OpDef& op,
                      absl::Span<const DTensorSpec* const> inputs,
                      const OpArgs& args, const CostModel* links);

  mutable Mutex mu_;
  absl::flat_hash_map<size_t, absl::InlinedVector<Entry, 1>> buckets_
      ABSL_GUARDED_BY(mu_);
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> misses_{0};
};

}  // namespace dtensor

#endif  // DTENSOR_OPS_PROPAGATION_CACHE_H_
