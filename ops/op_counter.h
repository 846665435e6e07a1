#ifndef DTENSOR_OPS_OP_COUNTER_H_
#define DTENSOR_OPS_OP_COUNTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/thread_scope.h"
#include "dtensor/dtensor_spec.h"

namespace dtensor {

// Counts the ops dispatched on this thread while the counter is active, the
// way CommCounter counts collectives: which ops ran, their output shardings and
// the bytes of this rank's output shards. Under a metadata-only runtime this
// estimates each rank's activation memory without computing anything.
//
//   OpCounter ops;
//   CommCounter comms;
//   {
//     OpCounter::Scope op_scope(ops);
//     CommCounter::Scope comm_scope(comms);
//     ... run a model on metadata-only DTensors ...
//   }
//   ops.total_local_bytes(), comms.count(CommKind::kAllReduce)
//
// Scopes nest; every active counter on the thread records. A counter is not
// thread-safe: each rank (thread) counts into its own.
// Requires: a counter outlives its scopes.
class OpCounter {
 public:
  struct Event {
    absl::string_view op;
    std::vector<std::shared_ptr<const DTensorSpec>> outputs;
    // Bytes of this rank's shards of the outputs.
    int64_t local_bytes = 0;
    // The propagation's estimated communication cost.
    double cost_us = 0;
  };

  // Makes a counter record on this thread until destroyed.
  using Scope = ThreadScope<OpCounter>;

  // Whether a counter is active on this thread (cheap: dispatch computes an
  // event only then).
  static bool AnyActive();
  // Records `event` in every counter active on this thread (none: nothing
  // happens).
  // Requires: the text Event::op views outlives the counters (dispatch
  // passes its OpDef's name, which lives as long as the registry).
  static void RecordOnThread(const Event& event);

  // Ops named `op` dispatched, and all ops.
  int64_t count(absl::string_view op) const;
  int64_t total() const { return static_cast<int64_t>(events_.size()); }
  // The sum over ops of their outputs' local bytes (what keeping every
  // activation costs this rank), and the largest single op's.
  int64_t total_local_bytes() const;
  int64_t peak_local_bytes() const;
  const std::vector<Event>& events() const { return events_; }
  void Reset() { events_.clear(); }

 private:
  std::vector<Event> events_;
};

// Bytes of `rank`'s shard of a tensor laid out by `spec`.
// Errors: NotFound when spec's mesh does not contain `rank`.
absl::StatusOr<int64_t> LocalBytes(const DTensorSpec& spec, int64_t rank);

}  // namespace dtensor

#endif  // DTENSOR_OPS_OP_COUNTER_H_
