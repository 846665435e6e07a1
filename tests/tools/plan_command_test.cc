// `dtensor plan`, run in-process: text and JSON output (also read back by
// ParseJson), --verify, link flags, and bad arguments; the step JSON it
// shares with `dtensor propagate`.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "dtensor/base/json_text.h"
#include "dtensor/base/json_value.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/plan.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"
#include "tools/commands.h"
#include "tools/step_json.h"

namespace dtensor {
namespace {

struct Output {
  int status;
  std::string out;
  std::string err;
};

Output RunPlan(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = RunPlanCommand(args, out, err);
  return {status, out.str(), err.str()};
}

// The number after `"key":` in `json` (the first occurrence).
double NumberAfter(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  EXPECT_NE(at, std::string::npos) << key << " in " << json;
  if (at == std::string::npos) return -1;
  return std::strtod(json.c_str() + at + key.size() + 3, nullptr);
}

TEST(PlanCommandTest, TransposedShardsAreOneVerifiedPermute) {
  const Output result =
      RunPlan({"--mesh", "2x2", "--shape", "8,8", "--from", "S(0),S(1)", "--to",
               "S(1),S(0)", "--verify", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  const std::string& json = result.out;
  EXPECT_TRUE(absl::StartsWith(
      json,
      "{\"steps\":[{\"kind\":\"permute\",\"mesh_dims\":[0,1],"
      "\"after\":\"S(1),S(0)\",\"bytes_per_rank\":64,\"cost_us\":"))
      << json;
  // One launch, one hop, a 4x4 f32 block at 87.7 GB/s.
  const double expected_us = 6.6 + 0.6 + 64 / 87.7e3;
  EXPECT_NEAR(NumberAfter(json, "cost_us"), expected_us, 1e-9);
  EXPECT_NEAR(NumberAfter(json, "total_cost_us"), expected_us, 1e-9);
  EXPECT_TRUE(absl::StrContains(json, "\"collectives\":1,\"verified\":true}"))
      << json;
}

// The JSON read back by ParseJson, a reader independent of the writer.
TEST(PlanCommandTest, JsonReadsBackWithParseJson) {
  const Output result =
      RunPlan({"--mesh", "2x2", "--shape", "8,8", "--from", "S(0),S(1)", "--to",
               "S(1),S(0)", "--verify", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  absl::StatusOr<JsonValue> json = ParseJson(result.out);
  ASSERT_TRUE(json.ok()) << json.status() << " in " << result.out;
  ASSERT_EQ(json->members().size(), 4u);
  EXPECT_EQ(json->members()[0].first, "steps");
  ASSERT_EQ(json->Find("steps")->items().size(), 1u);
  const JsonValue& step = json->Find("steps")->items()[0];
  EXPECT_EQ(step.Find("kind")->string_value(), "permute");
  EXPECT_EQ(step.Find("mesh_dims")->items()[1].number_value(), 1);
  EXPECT_EQ(step.Find("after")->string_value(), "S(1),S(0)");
  EXPECT_EQ(step.Find("bytes_per_rank")->number_value(), 64);
  const double expected_us = 6.6 + 0.6 + 64 / 87.7e3;
  EXPECT_NEAR(step.Find("cost_us")->number_value(), expected_us, 1e-9);
  EXPECT_EQ(json->Find("total_cost_us")->number_value(),
            step.Find("cost_us")->number_value());
  EXPECT_EQ(json->Find("collectives")->number_value(), 1);
  EXPECT_TRUE(json->Find("verified")->bool_value());
}

// A step's non-finite figures, which JSON lacks, are written as null.
TEST(StepJsonTest, NonFiniteFiguresAreNull) {
  RedistributeStep step;
  step.kind = CommKind::kAllReduce;
  step.after = Sharding::Parse("R", 1).value();
  step.bytes_per_rank = 1.5;
  step.cost_us = std::numeric_limits<double>::infinity();
  absl::StatusOr<JsonValue> json = ParseJson(DumpJson(StepJson(step)));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("kind")->string_value(), "all_reduce");
  EXPECT_TRUE(json->Find("mesh_dims")->items().empty());
  EXPECT_EQ(json->Find("after")->string_value(), "R");
  EXPECT_EQ(json->Find("bytes_per_rank")->number_value(), 1.5);
  EXPECT_TRUE(json->Find("cost_us")->is_null());
}

TEST(PlanCommandTest, LinkFlagsChangeTheCost) {
  // A 2-rank all-gather of 4 KiB: launch + 1 hop + 4096 B / bandwidth.
  const Output result =
      RunPlan({"--mesh", "2", "--shape", "2048", "--from", "S(0)", "--to", "R",
               "--bandwidth", "1", "--latency", "3", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NEAR(NumberAfter(result.out, "total_cost_us"), 6.6 + 3 + 4096 / 1e3,
              1e-9);
  EXPECT_FALSE(absl::StrContains(result.out, "verified")) << result.out;
}

TEST(PlanCommandTest, TextListsStepsAndTotal) {
  const Output result =
      RunPlan({"--mesh", "4,2", "--shape", "18,2", "--from", "P,S(0)", "--to",
               "S(0)[1],S(0)[0]", "--verify"});
  // "4,2" is not a mesh: a one-line usage error.
  EXPECT_EQ(result.status, 2);
  const Output ok = RunPlan({"--mesh", "dp=4,tp=2", "--shape", "18,2", "--from",
                             "P,S(0)", "--to", "S(0)[1],S(0)[0]", "--verify"});
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(absl::StrContains(ok.out, "reduce_scatter")) << ok.out;
  EXPECT_TRUE(absl::StrContains(ok.out, "total ")) << ok.out;
  EXPECT_TRUE(absl::StrContains(ok.out, "every shard matches")) << ok.out;
}

TEST(PlanCommandTest, BadArgumentsExitTwoWithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {"--mesh", "2x2", "--shape", "8,8", "--from", "S(0),S(1)"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "S(0),S(1)", "--to",
       "S(0)"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "S(0),S(1)", "--to", "P,R"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "S(5),R", "--to", "R,R"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "R,R", "--to", "R,R",
       "--bandwidth", "0"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "R,R", "--to", "R,R",
       "--latency", "1,2,3"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "R,R", "--to", "R,R",
       "--dtype", "f128"},
      {"--mesh", "2x2", "--shape", "8,8", "--from", "R,R", "--to", "R,R",
       "--bogus"},
  };
  for (const auto& args : cases) {
    const Output result = RunPlan(args);
    EXPECT_EQ(result.status, 2) << args.back() << ": " << result.out;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
}

}  // namespace
}  // namespace dtensor
