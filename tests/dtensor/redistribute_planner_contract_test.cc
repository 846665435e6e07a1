// The planner's contract beyond the plans it picks: errors that name the bad
// value (and CheckRedistribution agreeing with them), the sizes it can pack,
// and the shared plan cache (RedistributePlanner).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"
#include "tests/dtensor/redistribution_reference.h"

namespace dtensor {
namespace {

using reference::ParseShardingOrFail;

// ---- Errors name the bad value. ----

void ExpectError(const std::string& from, const std::string& to, int64_t rank,
                 const std::vector<int64_t>& mesh,
                 const std::vector<int64_t>& shape,
                 const std::vector<std::string>& named) {
  SCOPED_TRACE(from + " -> " + to);
  const Sharding a = ParseShardingOrFail(from, rank),
                 b = ParseShardingOrFail(to, rank);
  const CostModel model(static_cast<int64_t>(mesh.size()));
  absl::StatusOr<RedistributePlan> plan =
      PlanRedistribution(a, b, mesh, shape, DType::kF32, model);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckRedistribution(a, b, mesh, shape), plan.status());
  for (const std::string& text : named) {
    EXPECT_NE(plan.status().message().find(text), std::string::npos)
        << plan.status() << " does not name '" << text << "'";
  }
}

TEST(PlannerErrorTest, ShardToPartial) {
  ExpectError("R,S(0)", "R,P(sum)", 1, {2, 2}, {8},
              {"mesh dim 1", "S(0)", "P(sum)"});
  ExpectError("S(1)", "P(max)", 2, {4}, {8, 8},
              {"mesh dim 0", "S(1)", "P(max)"});
}

TEST(PlannerErrorTest, PartialOpChange) {
  ExpectError("P(sum)", "P(max)", 1, {4}, {8}, {"P(sum)", "P(max)"});
  ExpectError("R,P(avg)", "R,P(min)", 1, {2, 2}, {8},
              {"mesh dim 1", "P(avg)", "P(min)"});
}

TEST(PlannerErrorTest, ShapesThatDoNotFitTheShardings) {
  // Tensor rank 2 shardings for a rank 3 shape.
  ExpectError("S(0),R", "R,R", 2, {2, 2}, {8, 8, 8}, {"rank 2", "[8, 8, 8]"});
  // Two placements for a 1-d mesh.
  ExpectError("S(0),R", "R,R", 1, {4}, {8}, {"2 placements", "[4]"});
  ExpectError("S(0),R", "R,R", 1, {2, 0}, {8}, {"mesh dim 1", "size 0"});
  ExpectError("S(0),R", "R,R", 2, {2, 2}, {8, -3}, {"tensor dim 1", "-3"});
}

TEST(PlannerErrorTest, CostModelForAnotherMesh) {
  absl::StatusOr<RedistributePlan> plan = PlanRedistribution(
      ParseShardingOrFail("S(0),R", 1), ParseShardingOrFail("R,R", 1), {2, 2},
      {8}, DType::kF32, CostModel(3));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("3"), std::string::npos)
      << plan.status();
}

// ---- The plan cache. ----

TEST(RedistributePlannerTest, CachesOneSharedPlanPerKey) {
  RedistributePlanner& planner = RedistributePlanner::Shared();
  const Sharding from = ParseShardingOrFail("S(0),S(1)", 2);
  const Sharding to = ParseShardingOrFail("S(1),S(0)", 2);
  const std::vector<int64_t> mesh = {2, 2}, shape = {96, 96};
  const CostModel model(2);
  auto first = planner.Plan(from, to, mesh, shape, DType::kF32, model);
  auto again = planner.Plan(from, to, mesh, shape, DType::kF32, CostModel(2));
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());
  absl::StatusOr<RedistributePlan> direct =
      PlanRedistribution(from, to, mesh, shape, DType::kF32, model);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ((*first)->ToString(), direct->ToString());

  // Another dtype, shape or cost model is another plan.
  auto f64 = planner.Plan(from, to, mesh, shape, DType::kF64, model);
  auto bigger = planner.Plan(from, to, mesh, {96, 192}, DType::kF32, model);
  absl::StatusOr<CostModel> slow =
      CostModel::Create({{10, 0.6}, {10, 0.6}}, 6.6);
  ASSERT_TRUE(slow.ok());
  auto slow_plan = planner.Plan(from, to, mesh, shape, DType::kF32, *slow);
  ASSERT_TRUE(f64.ok() && bigger.ok() && slow_plan.ok());
  EXPECT_NE(f64->get(), first->get());
  EXPECT_DOUBLE_EQ((*f64)->steps[0].bytes_per_rank,
                   2 * (*first)->steps[0].bytes_per_rank);
  EXPECT_NE(bigger->get(), first->get());
  EXPECT_NE(slow_plan->get(), first->get());
  EXPECT_GT((*slow_plan)->total_cost_us, (*first)->total_cost_us);
}

TEST(RedistributePlannerTest, ConcurrentCallersShareOnePlan) {
  RedistributePlanner planner;
  const Sharding from = ParseShardingOrFail("S(0),S(0),R", 2);
  const Sharding to = ParseShardingOrFail("R,S(1),S(1)", 2);
  std::vector<const RedistributePlan*> got(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      auto plan = planner.Plan(from, to, {2, 2, 2}, {240, 240}, DType::kBF16,
                               CostModel(3));
      if (plan.ok()) got[i] = plan->get();
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_NE(got[0], nullptr);
  for (const RedistributePlan* plan : got) EXPECT_EQ(plan, got[0]);
}

TEST(RedistributePlannerTest, CacheIsBoundedAndClearable) {
  RedistributePlanner planner(/*capacity=*/3);
  EXPECT_EQ(planner.capacity(), 3u);
  const Sharding from = ParseShardingOrFail("S(0)", 1);
  const Sharding to = ParseShardingOrFail("R", 1);
  auto plan_for = [&](int64_t size) {
    auto plan = planner.Plan(from, to, {4}, {size}, DType::kF32, CostModel(1));
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : nullptr;
  };
  const std::shared_ptr<const RedistributePlan> first = plan_for(8);
  EXPECT_EQ(planner.size(), 1u);
  plan_for(16);
  plan_for(24);
  EXPECT_EQ(planner.size(), 3u);
  EXPECT_EQ(plan_for(8).get(), first.get());  // Still cached: a hit.
  EXPECT_EQ(planner.size(), 3u);
  // Sizes 32..96 never hold more than the capacity.
  for (int64_t size = 32; size <= 96; size += 8) {
    plan_for(size);
    EXPECT_LE(planner.size(), 3u);
  }
  // A plan handed out before the cache emptied stays valid; asking again
  // plans anew, with the same result as planning directly.
  const std::shared_ptr<const RedistributePlan> again = plan_for(8);
  absl::StatusOr<RedistributePlan> direct =
      PlanRedistribution(from, to, {4}, {8}, DType::kF32, CostModel(1));
  ASSERT_TRUE(direct.ok() && again != nullptr);
  EXPECT_EQ(first->ToString(), direct->ToString());
  EXPECT_EQ(again->ToString(), direct->ToString());
  planner.Clear();
  EXPECT_EQ(planner.size(), 0u);
  EXPECT_EQ(plan_for(8)->ToString(), direct->ToString());
  EXPECT_EQ(planner.size(), 1u);
}

TEST(RedistributePlannerTest, ErrorsAreReturnedNotCached) {
  RedistributePlanner planner;
  const Sharding from = ParseShardingOrFail("S(0)", 1);
  const Sharding to = ParseShardingOrFail("P(sum)", 1);
  for (int i = 0; i < 2; ++i) {
    auto plan = planner.Plan(from, to, {4}, {8}, DType::kF32, CostModel(1));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(PlannerTest, RejectsMeshesAndTensorsTooLargeToPack) {
  const CostModel model = *CostModel::Create(std::vector<MeshDimLink>(9));
  // Nine mesh dims of size 1.
  const std::vector<int64_t> nine_dims(9, 1);
  const Sharding replicated9 = ParseShardingOrFail("R,R,R,R,R,R,R,R,R", 1);
  absl::StatusOr<RedistributePlan> plan = PlanRedistribution(
      replicated9, replicated9, nine_dims, {4}, DType::kF32, model);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("9"), std::string::npos)
      << plan.status();
  // A tensor of rank 32 on one mesh dim.
  const std::vector<int64_t> shape32(32, 1);
  const CostModel model1 = *CostModel::Create(std::vector<MeshDimLink>(1));
  const Sharding shard = ParseShardingOrFail("S(31)", 32);
  plan =
      PlanRedistribution(shard, ParseShardingOrFail("R", 32),
                         std::vector<int64_t>{2}, shape32, DType::kF32, model1);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("32"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace dtensor
