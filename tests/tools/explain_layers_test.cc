// `dtensor explain` on deep models: beyond ExplainRequest::max_layers_run
// the report is extrapolated from 2- and 3-layer runs. Checked against the
// full layer-by-layer run (the reference) for every shipped plan and a few
// ranks: the same JSON, numbers equal up to float rounding of the sums.
#include "tools/explain_layers.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "tests/tools/json_compare.h"
#include "tools/explain.h"
#include "tools/explain_config.h"
#include "tools/explain_format.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

std::vector<std::string> ShippedPlanPaths() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string dir =
      absl::StrCat(srcdir == nullptr ? "." : srcdir, "/dtensor/parallel/plans");
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

ExplainRequest Request(const std::string& plan_path, int64_t n_layers) {
  nn::LlamaConfig config = LoadLlamaConfig("tiny").value();
  config.n_layers = n_layers;
  // 3 kv heads of 4 on tp=2 and a 255-byte vocabulary: uneven shards, so
  // the warnings repeat per layer.
  config.vocab_size = 255;
  // A context-parallel plan needs its cp mesh dim.
  const parallel::Plan plan = parallel::LoadPlanFile(plan_path).value();
  ExplainRequest request{
      "tiny", plan_path, config, plan,
      ParseMeshFlag(plan.context_parallel ? "dp=2,cp=2,tp=2" : "dp=2,tp=2")
          .value()};
  request.batch = 2;
  request.seq = 16;
  return request;
}

TEST(ExplainLayersTest, ExtrapolatedEqualsTheFullRunForEveryShippedPlan) {
  for (const std::string& path : ShippedPlanPaths()) {
    for (int64_t rank : {0, 3}) {
      SCOPED_TRACE(absl::StrCat(path, " rank ", rank));
      ExplainRequest full = Request(path, 7);
      ExplainRequest extrapolated = full;
      extrapolated.max_layers_run = 3;
      absl::StatusOr<ExplainReport> a = ExplainLlamaStep(full, rank);
      absl::StatusOr<ExplainReport> b = ExplainLlamaStep(extrapolated, rank);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->request.config.n_layers, 7);
      EXPECT_EQ(a->modules.size(), b->modules.size());
      EXPECT_EQ(a->warnings, b->warnings);
      ExpectSameJson(ParseJson(ExplainJson(*a)).value(),
                     ParseJson(ExplainJson(*b)).value(), "");
    }
  }
}

TEST(ExplainLayersTest, TenThousandLayersAnswer) {
  const std::vector<std::string> plans = ShippedPlanPaths();
  ASSERT_FALSE(plans.empty());
  absl::StatusOr<ExplainReport> four = ExplainLlamaStep(Request(plans[0], 4));
  absl::StatusOr<ExplainReport> five = ExplainLlamaStep(Request(plans[0], 5));
  const int64_t n = nn::kMaxLlamaLayers;
  absl::StatusOr<ExplainReport> deep = ExplainLlamaStep(Request(plans[0], n));
  ASSERT_TRUE(four.ok()) << four.status();
  ASSERT_TRUE(five.ok()) << five.status();
  ASSERT_TRUE(deep.ok()) << deep.status();
  // Each block adds what the fifth block added to four, measured in full.
  EXPECT_EQ(deep->modules.size() - four->modules.size(),
            (n - 4) * (five->modules.size() - four->modules.size()));
  EXPECT_EQ(deep->memory.total() - four->memory.total(),
            (n - 4) * (five->memory.total() - four->memory.total()));
  EXPECT_EQ(deep->step.collectives - four->step.collectives,
            (n - 4) * (five->step.collectives - four->step.collectives));
  const std::string last = absl::StrCat("layers.", n - 1);
  EXPECT_TRUE(
      std::any_of(deep->modules.begin(), deep->modules.end(),
                  [&](const ModuleReport& m) { return m.name == last; }));
}

TEST(ExplainLayersTest, PlansNamingOneLayerAreRunInFull) {
  parallel::Plan plan;
  EXPECT_TRUE(PlanTreatsLayersAlike(plan));
  plan.tp.push_back({"layers.*.attention.wq", {}});
  EXPECT_TRUE(PlanTreatsLayersAlike(plan));
  plan.tp.push_back({"layers.3.attention.wq", {}});
  EXPECT_FALSE(PlanTreatsLayersAlike(plan));
}

}  // namespace
}  // namespace dtensor
