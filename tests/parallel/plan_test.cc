#include "dtensor/parallel/plan.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace dtensor {
namespace parallel {
namespace {

TEST(PlanTest, ParsesStylesAndOptions) {
  auto plan = ParsePlan(R"json({
    "tp": {"layers.*.attention.wq": "colwise",
           "layers.*.attention.wo": "rowwise",
           "layers.*.attention_norm": "sequence_parallel",
           "output": {"style": "colwise", "output_layouts": "S(-1)",
                      "use_local_output": false
}
}
, "dp" : "fsdp"
})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tp_dim, "tp");
  EXPECT_EQ(plan->dp, DataParallel::kFsdp);
  ASSERT_EQ(plan->tp.size(), 4u);
  EXPECT_EQ(plan->tp[0].pattern, "layers.*.attention.wq");
  EXPECT_EQ(plan->tp[0].spec.style, Style::kColwise);
  EXPECT_FALSE(plan->tp[0].spec.use_local_output);  // Default (plan.h).
  EXPECT_EQ(plan->tp[1].spec.style, Style::kRowwise);
  EXPECT_EQ(plan->tp[2].spec.style, Style::kSequenceParallel);
  EXPECT_EQ(plan->tp[3].spec.output_layouts, "S(-1)");
  EXPECT_FALSE(plan->tp[3].spec.input_layouts.has_value());
  EXPECT_FALSE(plan->tp[3].spec.use_local_output);
}

TEST(PlanTest, ParsesBucketSizes) {
  auto plan = ParsePlan(R"json({"dp": "replicate", "bucket_mb": 4,
                                "first_bucket_mb": 0.5})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->bucket_bytes, 4 << 20);
  EXPECT_EQ(plan->first_bucket_bytes, 1 << 19);
  plan = ParsePlan(R"json({"dp": "replicate"})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->bucket_bytes, 25 << 20);  // DDP's defaults.
  EXPECT_EQ(plan->first_bucket_bytes, 1 << 20);
}

TEST(PlanTest, ParseErrorsNameTheValue) {
  const std::pair<const char*, const char*> cases[] = {
      {R"json({"tp": {"a": "diagonal"}})json", "\"diagonal\""},
      {R"json({"tp": {"a": {"style": "colwise", "stride": 2}}})json",
       "\"stride\""},
      {R"json({"tp": {"a": {"output_layouts": "R"}}})json", "\"style\""},
      {R"json({"tp": {"a": 3}})json", "not a number"},
      {R"json({"tp": {"a": {"style": "colwise", "use_local_output": "yes"}}})json",
       "use_local_output"},
      {R"json({"dp": "zero3"})json", "\"zero3\""},
      {R"json({"pp": {}})json", "\"pp\""},
      {R"json({"bucket_mb": 0})json", "\"bucket_mb\" is 0"},
      {R"json({"first_bucket_mb": -2})json", "\"first_bucket_mb\" is -2"},
      {R"json({"first_bucket_mb": "1"})json", "first_bucket_mb"},
      {R"json([1])json", "not a array"},
      {R"json({"tp": })json", "line 1 column 8"},
  };
  for (const auto& c : cases) {
    auto plan = ParsePlan(c.first);
    ASSERT_FALSE(plan.ok()) << c.first;
    EXPECT_NE(plan.status().message().find(c.second), std::string::npos)
        << c.first << " -> " << plan.status();
  }
}

TEST(PlanTest, LoadPlanFileMissingNamesPath) {
  auto plan = LoadPlanFile("/nonexistent/plan.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(plan.status().message().find("/nonexistent/plan.json"),
            std::string::npos);
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
