#include "dtensor/comm_counter.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/json_text.h"

namespace dtensor {
void CommCounter::RecordOnThread(const Event& event) {
  if (Scope::Active().empty()) return;
  Event owned = event;
  owned.owner = CommOwner::Current();
  for (CommCounter* counter : Scope::Active()) {
    counter->events_.push_back(owned);
  }
}

int64_t CommCounter::count(CommKind kind) const {
  return std::count_if(events_.begin(), events_.end(),
                       [kind](const Event& e) { return e.kind == kind; });
}

int64_t CommCounter::total_collectives() const {
  return static_cast<int64_t>(events_.size()) - count(CommKind::kLocal);
}

double CommCounter::bytes(CommKind kind) const {
  double total = 0;
  for (const Event& e : events_) {
    if (e.kind == kind) total += e.bytes;
  }
  return total;
}

double CommCounter::total_bytes() const {
  double total = 0;
  for (const Event& e : events_) total += e.bytes;
  return total;
}

double CommCounter::estimated_us() const {
  double total = 0;
  for (const Event& e : events_) total += e.estimated_us;
  return total;
}

void CommCounter::Reset() { events_.clear(); }

std::string CommCounter::ChromeTraceJson(int64_t rank) const {
  std::vector<std::string> entries;
  entries.reserve(events_.size());
  for (const Event& e : events_) {
    entries.push_back(absl::StrFormat(
        "{\"name\":%s,\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":0,"
        "\"tid\":%d,\"args\":{\"mesh_dims\":[%s],\"bytes\":%.0f,"
        "\"estimated_us\":%.3f,\"layout\":%s}}",
        JsonString(CommKindName(e.kind)), e.start_us, e.duration_us, rank,
        absl::StrJoin(e.mesh_dims, ","), e.bytes, e.estimated_us,
        JsonString(e.label)));
  }
  return absl::StrCat("{\"traceEvents\":[", absl::StrJoin(entries, ","), "]}");
}

absl::Status CommCounter::WriteChromeTrace(const std::string& path,
                                           int64_t rank) const {
  std::ofstream out(path);
  if (!out) {
    return absl::UnavailableError(
        absl::StrCat("cannot open trace file '", path, "' for writing"));
  }
  out << ChromeTraceJson(rank);
  out.close();
  if (!out) {
    return absl::DataLossError(
        absl::StrCat("failed writing trace file '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace dtensor
