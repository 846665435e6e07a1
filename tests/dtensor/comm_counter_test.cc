// CommCounter's Chrome trace, read back with ParseJson: the events' fields in
// order, times to the nanosecond, a label that needs escapes, and a
// non-finite time as null. Its totals, under both Keep modes, against sums
// over the recorded events.
#include "dtensor/comm_counter.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "dtensor/redistribute/cost_model.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// Quotes, backslash, control characters and non-ASCII UTF-8 (é, U+1F600).
constexpr char kLabel[] = "S(0) -> \"R\" \\ \n\t\x01 \xC3\xA9 \xF0\x9F\x98\x80";

CommCounter TwoEvents() {
  CommCounter counter;
  CommCounter::Scope scope(counter);
  CommCounter::Event gather;
  gather.kind = CommKind::kAllGather;
  gather.mesh_dims = {0, 1};
  gather.bytes = 4096;
  gather.estimated_us = 1.23456;
  gather.start_us = 10.0004;
  gather.duration_us = 2.5;
  gather.label = kLabel;
  CommCounter::RecordOnThread(gather);
  CommCounter::Event local;
  local.kind = CommKind::kLocal;
  local.estimated_us = std::numeric_limits<double>::quiet_NaN();
  local.duration_us = std::numeric_limits<double>::infinity();
  CommCounter::RecordOnThread(local);
  return counter;
}

double NumberOf(const JsonValue& object, const char* key) {
  const JsonValue* value = object.Find(key);
  EXPECT_TRUE(value != nullptr && value->is_number()) << key;
  return value != nullptr ? value->number_value() : -1;
}

TEST(CommCounterTest, ChromeTraceReadsBackWithItsValues) {
  const std::string trace = TwoEvents().ChromeTraceJson(5);
  absl::StatusOr<JsonValue> json = ParseJson(trace);
  ASSERT_TRUE(json.ok()) << json.status() << " in " << trace;
  ASSERT_EQ(json->members().size(), 1u);
  const JsonValue* events = json->Find("traceEvents");
  ASSERT_TRUE(events != nullptr && events->is_array()) << trace;
  ASSERT_EQ(events->items().size(), 2u);

  const JsonValue& gather = events->items()[0];
  const char* keys[] = {"name", "ph", "ts", "dur", "pid", "tid", "args"};
  ASSERT_EQ(gather.members().size(), std::size(keys));
  for (size_t i = 0; i < std::size(keys); ++i) {
    EXPECT_EQ(gather.members()[i].first, keys[i]);
  }
  EXPECT_EQ(gather.Find("name")->string_value(), "all_gather");
  EXPECT_EQ(gather.Find("ph")->string_value(), "X");
  EXPECT_EQ(NumberOf(gather, "ts"), 10.0);  // To the nanosecond.
  EXPECT_EQ(NumberOf(gather, "dur"), 2.5);
  EXPECT_EQ(NumberOf(gather, "pid"), 0);
  EXPECT_EQ(NumberOf(gather, "tid"), 5);
  const JsonValue& args = *gather.Find("args");
  ASSERT_EQ(args.Find("mesh_dims")->items().size(), 2u);
  EXPECT_EQ(args.Find("mesh_dims")->items()[1].number_value(), 1);
  EXPECT_EQ(NumberOf(args, "bytes"), 4096);
  EXPECT_EQ(NumberOf(args, "estimated_us"), 1.235);
  EXPECT_EQ(args.Find("layout")->string_value(), kLabel);

  const JsonValue& local = events->items()[1];
  EXPECT_EQ(local.Find("name")->string_value(), "local");
  EXPECT_TRUE(local.Find("dur")->is_null());
  EXPECT_TRUE(local.Find("args")->Find("estimated_us")->is_null());
  EXPECT_TRUE(local.Find("args")->Find("mesh_dims")->items().empty());
}

TEST(CommCounterTest, WriteChromeTraceWritesTheSameText) {
  const CommCounter counter = TwoEvents();
  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/trace.json");
  ASSERT_TRUE(counter.WriteChromeTrace(path, 3).ok());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), counter.ChromeTraceJson(3));
}

// Random events of every kind, recorded by an events counter and a totals
// counter in one scope: the totals equal sums over the events (summed here in
// recording order), the totals counter keeps no event, and Reset clears both.
TEST(CommCounterTest, TotalsAreSumsOverTheEventsInBothModes) {
  constexpr int kKinds = static_cast<int>(CommKind::kLocal) + 1;
  std::mt19937 random(7);
  CommCounter events;
  CommCounter totals(CommCounter::Keep::kTotals);
  {
    CommCounter::Scope events_scope(events);
    CommCounter::Scope totals_scope(totals);
    for (int i = 0; i < 500; ++i) {
      CommCounter::Event event;
      event.kind = static_cast<CommKind>(random() % kKinds);
      event.bytes = static_cast<double>(random() % 100000);
      event.estimated_us = static_cast<double>(random() % 1000) / 7.0;
      event.label = "S(0) -> R";
      CommCounter::RecordOnThread(event);
    }
  }
  ASSERT_EQ(events.events().size(), 500u);
  EXPECT_TRUE(totals.events().empty());
  double bytes[kKinds] = {};
  int64_t counts[kKinds] = {};
  double total_bytes = 0;
  double estimated_us = 0;
  for (const CommCounter::Event& event : events.events()) {
    counts[static_cast<int>(event.kind)] += 1;
    bytes[static_cast<int>(event.kind)] += event.bytes;
    total_bytes += event.bytes;
    estimated_us += event.estimated_us;
  }
  for (const CommCounter* counter : {&events, &totals}) {
    for (int k = 0; k < kKinds; ++k) {
      EXPECT_EQ(counter->count(static_cast<CommKind>(k)), counts[k]) << k;
      EXPECT_EQ(counter->bytes(static_cast<CommKind>(k)), bytes[k]) << k;
    }
    EXPECT_EQ(counter->total_collectives(),
              500 - counts[static_cast<int>(CommKind::kLocal)]);
    EXPECT_EQ(counter->total_bytes(), total_bytes);
    EXPECT_EQ(counter->estimated_us(), estimated_us);
  }
  totals.Reset();
  events.Reset();
  for (const CommCounter* counter : {&events, &totals}) {
    EXPECT_TRUE(counter->events().empty());
    EXPECT_EQ(counter->total_collectives(), 0);
    EXPECT_EQ(counter->count(CommKind::kLocal), 0);
    EXPECT_EQ(counter->total_bytes(), 0);
    EXPECT_EQ(counter->estimated_us(), 0);
  }
}

// Summary: rows by kind and mesh dims (written out here by hand), local
// steps below; under kTotals by kind with "*"; PrintTo prints it.
TEST(CommCounterTest, SummaryGroupsByKindAndMeshDims) {
  for (const CommCounter::Keep keep :
       {CommCounter::Keep::kEvents, CommCounter::Keep::kTotals}) {
    CommCounter counter(keep);
    {
      CommCounter::Scope scope(counter);
      for (const auto& [kind, dims, bytes] :
           std::vector<std::tuple<CommKind, std::vector<int64_t>, double>>{
               {CommKind::kAllReduce, {1}, 100},
               {CommKind::kAllGather, {0}, 64},
               {CommKind::kAllReduce, {1}, 28},
               {CommKind::kAllReduce, {0, 1}, 8},
               {CommKind::kLocal, {0}, 0}}) {
        CommCounter::Event event;
        event.kind = kind;
        event.mesh_dims = dims;
        event.bytes = bytes;
        CommCounter::RecordOnThread(event);
      }
    }
    const std::string header =
        "  kind             mesh dims     count   bytes received\n";
    const std::string expected =
        keep == CommCounter::Keep::kEvents
            ? header +
                  "  all_reduce       [1]               2              128\n"
                  "  all_gather       [0]               1               64\n"
                  "  all_reduce       [0, 1]            1                8\n"
                  "  total                              4              200\n"
                  "  (and 1 local steps)\n"
            : header +
                  "  all_gather       *                 1               64\n"
                  "  all_reduce       *                 3              136\n"
                  "  total                              4              200\n"
                  "  (and 1 local steps)\n";
    EXPECT_EQ(counter.Summary(), expected);
    EXPECT_EQ(::testing::PrintToString(counter), "CommCounter:\n" + expected);
  }
  CommCounter::Event event;
  event.kind = CommKind::kAllGather;
  event.mesh_dims = {0};
  event.bytes = 96;
  event.label = "S(0),R -> R,R";
  EXPECT_EQ(::testing::PrintToString(event),
            "all_gather mesh_dims=[0] 96 bytes \"S(0),R -> R,R\"");
}

}  // namespace
}  // namespace dtensor
