#include "dtensor/ops/op_counter.h"

#include <algorithm>

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {
bool OpCounter::AnyActive() { return !Scope::Active().empty(); }

void OpCounter::RecordOnThread(const Event& event) {
  for (OpCounter* counter : Scope::Active()) {
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
