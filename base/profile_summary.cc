#include "dtensor/base/profile_summary.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// Whether `record` belongs to the profiled steps.
bool Counts(const Profiler& profiler, const Profiler::Record& record) {
  return profiler.steps().empty() || record.step >= 0;
}

// Wall time of the steps, or the records' span when there are none.
double StepTime(const Profiler& profiler) {
  double total = 0;
  for (const Profiler::Step& step : profiler.steps()) total += step.wall_us;
  if (!profiler.steps().empty() || profiler.records().empty()) return total;
  double first = profiler.records().front().start_us;
  double last = first;
  for (const Profiler::Record& r : profiler.records()) {
    first = std::min(first, r.start_us);
    last = std::max(last, r.start_us + r.wall_us);
  }
  return last - first;
}

// "1.23 TFLOP/s", "45.6 GB/s" or "-".
std::string Achieved(const ProfileRow& row) {
  if (row.time_us <= 0) return "-";
  if (row.flops > 0) {
    const double tflops = row.flops / row.time_us / 1e6;
    if (tflops < 1) return absl::StrFormat("%.2f GFLOP/s", tflops * 1e3);
    return absl::StrFormat("%.2f TFLOP/s", tflops);
  }
  if (row.bytes > 0) {
    return absl::StrFormat("%.1f GB/s", row.bytes / row.time_us / 1e3);
  }
  return "-";
}

}  // namespace

ProfileSummary Summarize(const Profiler& profiler) {
  ProfileSummary summary;
  summary.rank = profiler.rank();
  summary.steps = static_cast<int64_t>(profiler.steps().size());
  summary.step_us = StepTime(profiler);
  for (const Profiler::Step& step : profiler.steps()) {
    summary.host_syncs += step.host_syncs;
  }
  if (profiler.steps().empty()) {
    summary.host_syncs = profiler.host_syncs_outside_steps();
  }
  std::map<std::tuple<bool, std::string, ProfilePhase>, ProfileRow> rows;
  for (const Profiler::Record& record : profiler.records()) {
    if (!Counts(profiler, record)) continue;
    const bool collective = record.kind == Profiler::Kind::kCollective;
    ProfileRow& row = rows[{collective, record.name, record.phase}];
    row.name = record.name;
    row.phase = record.phase;
    row.collective = collective;
    ++row.calls;
    const bool on_device = !collective && record.device_us >= 0;
    row.time_us += on_device ? record.device_us : record.wall_us;
    row.device_time = row.device_time || on_device;
    row.flops += record.flops;
    row.bytes += record.bytes;
    if (collective) summary.wait_us += record.wall_us;
  }
  for (auto& [key, row] : rows) summary.rows.push_back(std::move(row));
  std::stable_sort(summary.rows.begin(), summary.rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) {
                     return a.time_us > b.time_us;
                   });
  return summary;
}

std::string FormatProfileTable(const ProfileSummary& summary, int top) {
  const double steps = std::max<int64_t>(summary.steps, 1);
  std::string out = absl::StrFormat(
      "profile of rank %d: %d step(s), %.3f ms per step, collective wait "
      "%.3f ms per step, host syncs per step %.1f (target 0 apart from "
      "reading the loss)\n",
      summary.rank, summary.steps, summary.step_us / steps / 1e3,
      summary.wait_us / steps / 1e3, summary.host_syncs / steps);
  absl::StrAppendFormat(&out, "  %-40s %-9s %7s %11s %7s %11s  %s\n", "op",
                        "phase", "calls", "total ms", "% step", "us per call",
                        "achieved");
  const int shown = std::min<int>(top, static_cast<int>(summary.rows.size()));
  for (int i = 0; i < shown; ++i) {
    const ProfileRow& row = summary.rows[i];
    const std::string name =
        row.collective ? absl::StrCat(row.name, " (wait)")
                       : absl::StrCat(row.name, row.device_time ? "" : " [host]");
    const double percent =
        summary.step_us > 0 ? 100.0 * row.time_us / summary.step_us : 0;
    absl::StrAppendFormat(&out, "  %-40s %-9s %7d %11.3f %6.1f%% %11.1f  %s\n",
                          name, ProfilePhaseName(row.phase), row.calls,
                          row.time_us / 1e3, percent,
                          row.time_us / std::max<int64_t>(row.calls, 1),
                          Achieved(row));
  }
  if (shown < static_cast<int>(summary.rows.size())) {
    absl::StrAppendFormat(&out, "  ... %d more rows\n",
                          summary.rows.size() - shown);
  }
  return out;
}

RankWait RankWaitOf(const ProfileSummary& summary) {
  return {summary.rank,
          summary.wait_us / static_cast<double>(std::max<int64_t>(
                                summary.steps, 1))};
}

std::vector<int64_t> ImbalancedRanks(absl::Span<const RankWait> waits) {
  std::vector<int64_t> named;
  if (waits.size() < 2) return named;
  double least = waits[0].wait_us_per_step;
  for (const RankWait& w : waits) least = std::min(least, w.wait_us_per_step);
  for (const RankWait& w : waits) {
    if (w.wait_us_per_step >= kImbalanceRatio * least &&
        w.wait_us_per_step - least >= kImbalanceMinUs) {
      named.push_back(w.rank);
    }
  }
  return named;
}

std::string FormatRankWaits(absl::Span<const RankWait> waits) {
  std::string out = "collective wait per step:";
  const RankWait* straggler = nullptr;
  for (const RankWait& w : waits) {
    absl::StrAppendFormat(&out, "  rank %d %.3f ms", w.rank,
                          w.wait_us_per_step / 1e3);
    if (straggler == nullptr ||
        w.wait_us_per_step < straggler->wait_us_per_step) {
      straggler = &w;
    }
  }
  out += "\n";
  const std::vector<int64_t> named = ImbalancedRanks(waits);
  if (named.empty()) {
    absl::StrAppendFormat(
        &out, "balanced: no rank waits %.0fx and %.0f ms longer than the "
              "least-waiting one\n",
        kImbalanceRatio, kImbalanceMinUs / 1e3);
    return out;
  }
  absl::StrAppendFormat(
      &out,
      "imbalance: rank(s) %s wait at least %.0fx and %.0f ms per step longer "
      "than rank %d, which the others wait for (the straggler)\n",
      absl::StrJoin(named, ", "), kImbalanceRatio, kImbalanceMinUs / 1e3,
      straggler->rank);
  return out;
}

}  // namespace dtensor
