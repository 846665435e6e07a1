#include "dtensor/comm_counter.h"

#include <cmath>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/json_text.h"
#include "nlohmann/json.hpp"

namespace dtensor {
CommCounter::Event CommCounter::Estimated(const CostModel& model, CommKind kind,
                                          std::vector<int64_t> mesh_dims,
                                          absl::Span<const int64_t> mesh_shape,
                                          double local_bytes,
                                          std::string label) {
  int64_t group_size = 1;
  for (int64_t m : mesh_dims) group_size *= mesh_shape[m];
  Event event;
  event.kind = kind;
  event.bytes = CostModel::ReceivedBytes(kind, group_size, local_bytes);
  event.estimated_us =
      model.StepCostUs(kind, mesh_dims, mesh_shape, local_bytes);
  event.mesh_dims = std::move(mesh_dims);
  event.label = std::move(label);
  return event;
}

void CommCounter::RecordOnThread(const Event& event) {
  if (Scope::Active().empty()) return;
  Event owned = event;
  owned.owner = CommOwner::Current();
  for (CommCounter* counter : Scope::Active()) counter->Record(owned);
}

void CommCounter::Record(const Event& event) {
  KindTotals& kind = kinds_[static_cast<size_t>(event.kind)];
  ++kind.count;
  kind.bytes += event.bytes;
  total_bytes_ += event.bytes;
  estimated_us_ += event.estimated_us;
  if (keep_ == Keep::kEvents) events_.push_back(event);
}

int64_t CommCounter::count(CommKind kind) const {
  return kinds_[static_cast<size_t>(kind)].count;
}

int64_t CommCounter::total_collectives() const {
  int64_t total = 0;
  for (const KindTotals& kind : kinds_) total += kind.count;
  return total - count(CommKind::kLocal);
}

double CommCounter::bytes(CommKind kind) const {
  return kinds_[static_cast<size_t>(kind)].bytes;
}

double CommCounter::total_bytes() const { return total_bytes_; }

double CommCounter::estimated_us() const { return estimated_us_; }

void CommCounter::Reset() {
  events_.clear();
  kinds_ = {};
  total_bytes_ = 0;
  estimated_us_ = 0;
}

namespace {

// Microseconds to the nanosecond, as the trace has always given them.
nlohmann::ordered_json Microseconds(double us) {
  return JsonNumber(std::round(us * 1000) / 1000);
}

}  // namespace

std::string CommCounter::ChromeTraceJson(int64_t rank) const {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const Event& e : events_) {
    entries.push_back({{"name", std::string(CommKindName(e.kind))},
                       {"ph", "X"},
                       {"ts", Microseconds(e.start_us)},
                       {"dur", Microseconds(e.duration_us)},
                       {"pid", 0},
                       {"tid", rank},
                       {"args",
                        {{"mesh_dims", e.mesh_dims},
                         {"bytes", JsonNumber(std::round(e.bytes))},
                         {"estimated_us", Microseconds(e.estimated_us)},
                         {"layout", e.label}}}});
  }
  return DumpJson({{"traceEvents", std::move(entries)}});
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
