#include "ops/op_counter.h"

#include <algorithm>

#include "tensor/dtype.h"
#include "base/status_macros.h"

namespace dtensor {
namespace {

// The counters active on this thread, innermost last.
thread_local std::vector<OpCounter*> active_counters;

}  // namespace

OpCounter::Scope::Scope(OpCounter& counter) : counter_(&counter) {
  active_counters.push_back(counter_);
}

OpCounter::Scope::~Scope() {
  auto it =
      std::find(active_counters.rbegin(), active_counters.rend(), counter_);
  if (it != active_counters.rend()) {
    active_counters.erase(std::next(it).base());
  }
}

bool OpCounter::AnyActive() { return !active_counters.empty(); }

void OpCounter::RecordOnThread(const Event& event) {
  for (OpCounter* counter : active_counters) {
    counter->events_.push_back(event);
  }
}

int64_t OpCounter::count(absl::string_view op) const {
  return std::count_if(events_.begin(), events_.end(),
                       [op](const Event& e) { return e.op == op; });
}

int64_t OpCounter::total_local_bytes() const {
  int64_t total = 0;
  for (const Event& e : events_) total += e.local_bytes;
  return total;
}

int64_t OpCounter::peak_local_bytes() const {
  int64_t peak = 0;
  for (const Event& e : events_) peak = std::max(peak, e.local_bytes);
  return peak;
}

absl::StatusOr<int64_t> LocalBytes(const DTensorSpec& spec, int64_t rank) {
  DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(rank));
  return block.numel() * static_cast<int64_t>(ElementSize(spec.dtype()));
}

}  // namespace dtensor
