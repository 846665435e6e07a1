#ifndef DTENSOR_DTENSOR_COMM_COUNTER_H_
#define DTENSOR_DTENSOR_COMM_COUNTER_H_

#include <array>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/base/thread_scope.h"
#include "dtensor/comm_owner.h"
#include "dtensor/redistribute/cost_model.h"

namespace dtensor {

// Counts the collectives that DTensor code issues on this thread while the
// counter is active, like PyTorch's CommDebugMode: how many of each kind, the
// bytes this rank received, and a trace of the steps that can be written as
// Chrome-trace JSON (chrome://tracing, Perfetto).
//
//   CommCounter counter;
//   {
//     CommCounter::Scope scope(counter);
//     DT_ASSIGN_OR_RETURN(DTensor y, x.Redistribute(...));
//   }
//   counter.count(CommKind::kAllGather);
//
// Scopes nest; every active counter on the thread records. In the in-process
// backend each rank is a thread, so each rank's counter sees its own steps.
// A counter that spans a long run keeps only its totals (Keep::kTotals), so
// that its memory does not grow with every step.
class CommCounter {
 public:
  // What a counter keeps. kEvents: every event (for traces, matchers, tables
  // per owner); its memory grows with each step recorded. kTotals: only the
  // figures per kind (count, bytes, estimated time); events() stays empty.
  enum class Keep : uint8_t { kEvents, kTotals };

  explicit CommCounter(Keep keep = Keep::kEvents) : keep_(keep) {}

  // One step of a redistribution (local steps included).
  struct Event {
    CommKind kind;
    std::vector<int64_t> mesh_dims;
    // Bytes this rank received (the cost model's padded figure).
    double bytes = 0;
    // Estimated by the cost model, and measured (0 in metadata-only mode).
    double estimated_us = 0;
    double start_us = 0;
    double duration_us = 0;
    // "S(0),R -> R,R".
    std::string label;
    // CommOwner::Current() when recorded (RecordOnThread sets it).
    const void* owner = nullptr;
    // A collective that carries the tensors of several owners (a gradient
    // bucket: dtensor/parallel/gradient_buckets.h) lists each owner with the
    // bytes received for its tensors (the shares' bytes add up to `bytes`) and
    // the time they add to the collective (the bandwidth term; the fixed
    // latency is the collective's alone); empty: the whole collective is
    // `owner`'s.
    struct Share {
      const void* owner = nullptr;
      double bytes = 0;
      double estimated_us = 0;
    };
    std::vector<Share> shares;
  };

  // Makes a counter record on this thread until destroyed.
  using Scope = ThreadScope<CommCounter>;

  // Records `event`, stamped with CommOwner::Current(), in every counter
  // active on this thread.
  static void RecordOnThread(const Event& event);

  // The event of a `kind` collective over `mesh_dims` of a mesh of
  // `mesh_shape` that a collective issued outside a redistribution plan (an
  // op kernel's, a gradient bucket's, an FSDP gather's) records: the bytes a
  // rank holding `local_bytes` receives and the time `model` estimates; no
  // shares.
  static Event Estimated(const CostModel& model, CommKind kind,
                         std::vector<int64_t> mesh_dims,
                         absl::Span<const int64_t> mesh_shape,
                         double local_bytes, std::string label);

  // Collectives of `kind` (local steps are counted under kLocal).
  int64_t count(CommKind kind) const;
  // Collectives of every kind but kLocal.
  int64_t total_collectives() const;
  double bytes(CommKind kind) const;
  double total_bytes() const;
  double estimated_us() const;
  // Empty under Keep::kTotals.
  const std::vector<Event>& events() const { return events_; }
  void Reset();

  // {"traceEvents":[{"name":"all_gather","ph":"X","ts":..,"dur":..,
  //  "pid":0,"tid":<rank>,"args":{"mesh_dims":[..],"bytes":..,
  //  "estimated_us":..,"layout":<label>}}, ...]} on one line: times in
  //  microseconds to the nanosecond, bytes whole, a non-finite figure null.
  std::string ChromeTraceJson(int64_t rank) const;
  absl::Status WriteChromeTrace(const std::string& path, int64_t rank) const;

  // The collectives as a table, one row per kind and mesh dims in the order
  // first seen (per kind only under Keep::kTotals, the dims column "*"),
  // local steps left out of the rows and counted below them:
  //
  //   kind             mesh dims    count   bytes received
  //   all_gather       [0]              6           786432
  //   all_reduce       [1]            138         65356872
  //   total                           144         66143304
  //   (and 12 local steps)
  std::string Summary() const;

 private:
  struct KindTotals {
    int64_t count = 0;
    double bytes = 0;
  };

  void Record(const Event& event);

  Keep keep_;
  std::vector<Event> events_;
  // Summed in recording order, whatever is kept.
  std::array<KindTotals, static_cast<size_t>(CommKind::kLocal) + 1> kinds_{};
  double total_bytes_ = 0;
  double estimated_us_ = 0;
};

// GoogleTest's printers: a failing matcher on a counter prints its Summary,
// an event prints as `all_gather mesh_dims=[0] 96 bytes "S(0),R -> R,R"`.
void PrintTo(const CommCounter& counter, std::ostream* os);
void PrintTo(const CommCounter::Event& event, std::ostream* os);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_COMM_COUNTER_H_
