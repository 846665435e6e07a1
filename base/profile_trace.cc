#include "dtensor/base/profile_trace.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/json_text.h"

namespace dtensor {
namespace {

using Json = nlohmann::ordered_json;

Json Complete(absl::string_view name, absl::string_view category,
              int64_t rank, double start_us, double wall_us) {
  Json event = Json::object();
  event["name"] = std::string(name);
  event["cat"] = std::string(category);
  event["ph"] = "X";
  event["ts"] = JsonNumber(start_us);
  event["dur"] = JsonNumber(wall_us);
  event["pid"] = 0;
  event["tid"] = rank;
  return event;
}

Json RecordEvent(const Profiler::Record& record, int64_t rank) {
  const bool collective = record.kind == Profiler::Kind::kCollective;
  Json event = Complete(record.name, collective ? "collective" : "op", rank,
                        record.start_us, record.wall_us);
  Json args = Json::object();
  args["phase"] = std::string(ProfilePhaseName(record.phase));
  if (record.device_us >= 0) args["device_us"] = JsonNumber(record.device_us);
  if (record.flops > 0) args["flops"] = JsonNumber(record.flops);
  if (record.bytes > 0) args["bytes"] = JsonNumber(record.bytes);
  event["args"] = std::move(args);
  return event;
}

// One event per (step, phase): from the phase's first record's start to its
// last one's end.
void AppendPhases(const Profiler& profiler, Json& events) {
  std::map<std::pair<int64_t, ProfilePhase>, std::pair<double, double>> spans;
  for (const Profiler::Record& r : profiler.records()) {
    const auto key = std::make_pair(r.step, r.phase);
    const double end = r.start_us + r.wall_us;
    auto [it, inserted] = spans.emplace(key, std::make_pair(r.start_us, end));
    if (!inserted) {
      it->second.first = std::min(it->second.first, r.start_us);
      it->second.second = std::max(it->second.second, end);
    }
  }
  for (const auto& [key, span] : spans) {
    events.push_back(Complete(ProfilePhaseName(key.second), "phase",
                              profiler.rank(), span.first,
                              span.second - span.first));
  }
}

}  // namespace

std::string ProfileTraceJson(absl::Span<const Profiler* const> ranks) {
  Json events = Json::array();
  for (const Profiler* profiler : ranks) {
    const int64_t rank = profiler->rank();
    Json name = Json::object();
    name["name"] = "thread_name";
    name["ph"] = "M";
    name["pid"] = 0;
    name["tid"] = rank;
    name["args"] = Json{{"name", absl::StrCat("rank ", rank)}};
    events.push_back(std::move(name));
    for (size_t s = 0; s < profiler->steps().size(); ++s) {
      const Profiler::Step& step = profiler->steps()[s];
      Json event = Complete(absl::StrCat("step ", s), "step", rank,
                            step.start_us, step.wall_us);
      event["args"] = Json{{"host_syncs", step.host_syncs}};
      events.push_back(std::move(event));
    }
    AppendPhases(*profiler, events);
    for (const Profiler::Record& record : profiler->records()) {
      events.push_back(RecordEvent(record, rank));
    }
  }
  Json trace = Json::object();
  trace["traceEvents"] = std::move(events);
  trace["displayTimeUnit"] = "ms";
  return DumpJson(trace);
}

absl::Status WriteProfileTrace(const std::string& path,
                               absl::Span<const Profiler* const> ranks) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << ProfileTraceJson(ranks);
  file.close();
  if (!file) {
    return absl::UnavailableError(
        absl::StrCat("cannot write the profile trace to ", path));
  }
  return absl::OkStatus();
}

}  // namespace dtensor
