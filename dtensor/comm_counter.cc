#include "dtensor/comm_counter.h"

#include <cmath>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

// "[0, 1]".
std::string DimsText(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

}  // namespace

std::string CommCounter::Summary() const {
  struct Row {
    CommKind kind;
    std::string dims;
    int64_t count = 0;
    double bytes = 0;
  };
  std::vector<Row> rows;
  const auto add = [&rows](CommKind kind, std::string dims, int64_t count,
                           double bytes) {
    for (Row& row : rows) {
      if (row.kind != kind || row.dims != dims) continue;
      row.count += count;
      row.bytes += bytes;
      return;
    }
    rows.push_back({kind, std::move(dims), count, bytes});
  };
  if (keep_ == Keep::kEvents) {
    for (const Event& e : events_) {
      if (e.kind != CommKind::kLocal)
        add(e.kind, DimsText(e.mesh_dims), 1, e.bytes);
    }
  } else {
    for (size_t k = 0; k < kinds_.size(); ++k) {
      const CommKind kind = static_cast<CommKind>(k);
      if (kind != CommKind::kLocal && kinds_[k].count > 0) {
        add(kind, "*", kinds_[k].count, kinds_[k].bytes);
      }
    }
  }
  std::string out = absl::StrFormat("  %-16s %-10s %8s %16s\n", "kind",
                                    "mesh dims", "count", "bytes received");
  for (const Row& row : rows) {
    absl::StrAppendFormat(&out, "  %-16s %-10s %8d %16.0f\n",
                          CommKindName(row.kind), row.dims, row.count,
                          row.bytes);
  }
  absl::StrAppendFormat(&out, "  %-16s %-10s %8d %16.0f\n", "total", "",
                        total_collectives(),
                        total_bytes_ - bytes(CommKind::kLocal));
  if (count(CommKind::kLocal) > 0) {
    absl::StrAppend(&out, "  (and ", count(CommKind::kLocal),
                    " local steps)\n");
  }
  return out;
}

void PrintTo(const CommCounter& counter, std::ostream* os) {
  *os << "CommCounter:\n" << counter.Summary();
}

void PrintTo(const CommCounter::Event& event, std::ostream* os) {
  *os << CommKindName(event.kind) << " mesh_dims=" << DimsText(event.mesh_dims)
      << " " << absl::StrFormat("%.0f", event.bytes) << " bytes \""
      << event.label << "\"";
}

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
