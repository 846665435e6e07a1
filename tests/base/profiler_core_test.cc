// The profiler's core on hand-made records: scopes and phases, host syncs by
// step, device spans read at Resolve, the summary's rows and percentages,
// the imbalance threshold at its edges, and the trace's JSON.
#include "dtensor/base/profiler.h"

#include <memory>
#include <string>
#include <vector>

#include "dtensor/base/profile_summary.h"
#include "dtensor/base/profile_trace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dtensor {
namespace {

class FixedSpan : public DeviceSpan {
 public:
  explicit FixedSpan(absl::StatusOr<double> us) : us_(std::move(us)) {}
  absl::StatusOr<double> ElapsedUs() const override { return us_; }

 private:
  absl::StatusOr<double> us_;
};

Profiler::Record Op(const std::string& name, double wall_us) {
  Profiler::Record record;
  record.name = name;
  record.start_us = Profiler::ClockUs();
  record.wall_us = wall_us;
  return record;
}

TEST(ProfilerCoreTest, HooksRecordOnlyInsideAScope) {
  Profiler profiler(3);
  EXPECT_FALSE(Profiler::Active());
  Profiler::RecordOnThread(Op("mm", 1));
  Profiler::NoteHostSync();
  {
    Profiler::Scope scope(profiler);
    EXPECT_TRUE(Profiler::Active());
    Profiler::RecordOnThread(Op("mm", 1));
  }
  EXPECT_FALSE(Profiler::Active());
  Profiler::RecordOnThread(Op("mm", 1));
  ASSERT_EQ(profiler.records().size(), 1u);
  EXPECT_EQ(profiler.records()[0].step, -1);
  EXPECT_EQ(profiler.host_syncs_outside_steps(), 0);
}

TEST(ProfilerCoreTest, PhasesStepsAndHostSyncs) {
  Profiler profiler(0);
  Profiler::Scope scope(profiler);
  Profiler::NoteHostSync();  // Outside a step.
  for (int s = 0; s < 2; ++s) {
    Profiler::StepScope step(profiler);
    Profiler::RecordOnThread(Op("mm", 10));
    {
      ProfilePhaseScope backward(ProfilePhase::kBackward);
      Profiler::RecordOnThread(Op("mm", 20));
      Profiler::NoteHostSync();
      {
        ProfilePhaseScope optimizer(ProfilePhase::kOptimizer);
        Profiler::RecordOnThread(Op("adamw", 5));
      }
      EXPECT_EQ(CurrentProfilePhase(), ProfilePhase::kBackward);
    }
  }
  EXPECT_EQ(CurrentProfilePhase(), ProfilePhase::kForward);
  ASSERT_EQ(profiler.steps().size(), 2u);
  EXPECT_EQ(profiler.steps()[1].host_syncs, 1);
  EXPECT_EQ(profiler.host_syncs_outside_steps(), 1);
  const auto& records = profiler.records();
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(records[4].phase, ProfilePhase::kBackward);
  EXPECT_EQ(records[4].step, 1);
  EXPECT_EQ(records[5].phase, ProfilePhase::kOptimizer);

  const ProfileSummary summary = Summarize(profiler);
  EXPECT_EQ(summary.steps, 2);
  EXPECT_EQ(summary.host_syncs, 2);
  ASSERT_EQ(summary.rows.size(), 3u);
  EXPECT_EQ(summary.rows[0].name, "mm");
  EXPECT_EQ(summary.rows[0].phase, ProfilePhase::kBackward);
  EXPECT_EQ(summary.rows[0].calls, 2);
  EXPECT_EQ(summary.rows[0].time_us, 40);
  EXPECT_EQ(summary.rows[2].name, "adamw");
}

TEST(ProfilerCoreTest, ResolveReadsDeviceSpansOnce) {
  Profiler profiler(0);
  {
    Profiler::Scope scope(profiler);
    Profiler::Record gemm = Op("mm", 100);
    gemm.device = std::make_shared<FixedSpan>(7.5);
    gemm.flops = 7.5e6;  // 1 TFLOP/s over 7.5 us.
    Profiler::RecordOnThread(gemm);
    Profiler::Record failed = Op("add", 3);
    failed.device =
        std::make_shared<FixedSpan>(absl::InternalError("device lost"));
    Profiler::RecordOnThread(failed);
  }
  const absl::Status status = profiler.Resolve();
  EXPECT_EQ(status.message(), "device lost");
  EXPECT_EQ(profiler.records()[0].device_us, 7.5);
  EXPECT_EQ(profiler.records()[0].device, nullptr);
  EXPECT_LT(profiler.records()[1].device_us, 0);
  const ProfileSummary summary = Summarize(profiler);
  // The device time, not the host's 100 us, is the op's.
  EXPECT_EQ(summary.rows[0].name, "mm");
  EXPECT_EQ(summary.rows[0].time_us, 7.5);
  EXPECT_TRUE(summary.rows[0].device_time);
  EXPECT_NE(FormatProfileTable(summary).find("1.00 TFLOP/s"),
            std::string::npos)
      << FormatProfileTable(summary);
}

TEST(ProfilerCoreTest, ImbalanceNeedsTheRatioAndTheFloor) {
  // Twice the least and 1 ms more: named.
  EXPECT_EQ(ImbalancedRanks({{0, 1000}, {1, 2000}, {2, 1100}}),
            std::vector<int64_t>{1});
  // Twice the least but only 0.9 ms more: noise.
  EXPECT_TRUE(ImbalancedRanks({{0, 900}, {1, 1800}}).empty());
  // 1 ms more but under twice: balanced.
  EXPECT_TRUE(ImbalancedRanks({{0, 5000}, {1, 6500}}).empty());
  // One rank alone is never imbalanced.
  EXPECT_TRUE(ImbalancedRanks({{0, 1e6}}).empty());
  const std::string text = FormatRankWaits({{0, 30000}, {1, 200}, {2, 25000}});
  EXPECT_NE(text.find("rank(s) 0, 2 wait"), std::string::npos) << text;
  EXPECT_NE(text.find("than rank 1"), std::string::npos) << text;
}

TEST(ProfilerCoreTest, TraceNestsStepPhaseAndOpOnTheRanksTrack) {
  Profiler profiler(5);
  {
    Profiler::Scope scope(profiler);
    Profiler::StepScope step(profiler);
    Profiler::RecordOnThread(Op("mm", 0));
  }
  const nlohmann::json trace =
      nlohmann::json::parse(ProfileTraceJson({&profiler}), nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  std::vector<std::string> names;
  for (const auto& event : trace["traceEvents"]) {
    EXPECT_EQ(event["tid"], 5);
    names.push_back(event["name"].get<std::string>());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"thread_name", "step 0",
                                             "forward", "mm"}));
  const auto& step = trace["traceEvents"][1];
  const auto& op = trace["traceEvents"][3];
  EXPECT_LE(step["ts"].get<double>(), op["ts"].get<double>());
  EXPECT_GE(step["ts"].get<double>() + step["dur"].get<double>(),
            op["ts"].get<double>() + op["dur"].get<double>());
}

}  // namespace
}  // namespace dtensor
