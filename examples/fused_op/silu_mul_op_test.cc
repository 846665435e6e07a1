// The example user op: its results on random meshes and layouts (Partial
// terms included) against silu(gate) * up on the full tensors, its gradients
// against finite differences and across layouts, its sharding rule, its
// registration, and overriding a built-in op's rule.
#include "examples/fused_op/silu_mul_op.h"

#include <random>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/registry.h"
#include "dtensor/ops/sharding_override.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/grad_checks.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::Full;
using testing_util::In;
using testing_util::IssuedNoCollectives;
using testing_util::OpCase;

TEST(SiluMulTest, MatchesTheFullTensorReferenceOnRandomShardings) {
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    const std::vector<int64_t> mesh = testing_util::RandomMeshShape(rng);
    std::vector<OpCase> cases;
    for (int k = 0; k < 8; ++k) {
      const Shape shape = testing_util::RandomShape(1 + rng() % 3, 7, rng);
      OpCase c;
      for (int i = 0; i < 2; ++i) {
        c.inputs.push_back(
            testing_util::RandomTensor(shape, DType::kF64, -3, 3, rng));
        c.shardings.push_back(testing_util::RandomSharding(
            static_cast<int64_t>(mesh.size()),
            static_cast<int64_t>(shape.size()),
            testing_util::PartialOpsFor(DType::kF64), rng));
      }
      c.description = ShapeToString(shape);
      cases.push_back(std::move(c));
    }
    const absl::Status status = testing_util::CheckCases(
        mesh, cases,
        [](const In& in) -> absl::StatusOr<In> {
          DT_ASSIGN_OR_RETURN(DTensor out, examples::SiluMul(in[0], in[1]));
          return In{std::move(out)};
        },
        [](const Full& in) -> absl::StatusOr<Full> {
          DT_ASSIGN_OR_RETURN(Tensor activated, Silu(in[0]));
          DT_ASSIGN_OR_RETURN(Tensor out, Mul(activated, in[1]));
          return Full{std::move(out)};
        },
        /*rtol=*/1e-9, /*atol=*/1e-9);
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(SiluMulTest, GradientsMatchFiniteDifferencesOnEveryLayout) {
  std::mt19937 rng(11);
  testing_util::GradCase c;
  c.op = "silu_mul";
  c.description = "silu_mul [4, 6]";
  c.inputs = {testing_util::Random64({4, 6}, -2, 2, rng),
              testing_util::Random64({4, 6}, -2, 2, rng)};
  c.fn = [](const In& in) { return examples::SiluMul(in[0], in[1]); };
  EXPECT_TRUE(testing_util::CheckGradCase(c, /*seed=*/3,
                                          /*sharding_rounds=*/6, 1e-6)
                  .ok());
}

TEST(SiluMulTest, ShardsFollowTheInputsAndUpsPartialPasses) {
  using testing_util::RunOnMeta;
  const auto call = [](const In& in) {
    return examples::SiluMul(in[0], in[1]);
  };
  testing_util::MetaOutcome o =
      RunOnMeta({2, 2}, {{{8, 6}, "S(0),S(1)"}, {{8, 6}, "S(0),S(1)"}}, call);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0),S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = RunOnMeta({4}, {{{8, 6}, "R"}, {{8, 6}, "P(sum)"}}, call);
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // silu is not linear: a Partial gate is completed first.
  o = RunOnMeta({4}, {{{8, 6}, "P(sum)"}, {{8, 6}, "R"}}, call);
  EXPECT_GE(o.comms.total_collectives(), 1);
  EXPECT_EQ(o.sharding.find('P'), std::string::npos) << o.sharding;
  o = RunOnMeta({4}, {{{8, 6}, "R"}, {{8, 5}, "R"}}, call);
  EXPECT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("silu_mul"), std::string::npos);
}

TEST(SiluMulTest, IsRegisteredForEveryFrontEnd) {
  absl::StatusOr<const OpDef*> found = OpRegistry::Global().Find("silu_mul");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, &examples::SiluMulDef());
  EXPECT_FALSE(OpRegistry::Builtin().Find("silu_mul").ok());
  // A second registration under the same name is refused, not a crash.
  EXPECT_EQ(OpRegistry::Global().Register(&examples::SiluMulDef()).code(),
            absl::StatusCode::kAlreadyExists);
}

// Like PyTorch's register_sharding: a user rule replaces relu's for typed
// calls too (here: only Replicate, so a sharded input is gathered), until
// restored; the cached choices of the old rule are not reused.
TEST(ShardingOverrideTest, AUserRuleReplacesABuiltinOpsRuleUntilRestored) {
  using testing_util::RunOnMeta;
  const auto relu = [](const In& in) { return ops::Relu(in[0]); };
  testing_util::MetaOutcome o = RunOnMeta({4}, {{{8, 6}, "S(0)"}}, relu);
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  ASSERT_TRUE(
      OpRegistry::Global()
          .OverrideShardingRule("relu",
                                [](const StrategyContext& ctx)
                                    -> absl::StatusOr<std::vector<OpStrategy>> {
                                  OpStrategy s;
                                  s.inputs = {*Sharding::Parse(
                                      "R", ctx.inputs[0]->ndim())};
                                  s.outputs = {s.inputs[0]};
                                  return std::vector<OpStrategy>{s};
                                })
          .ok());
  EXPECT_TRUE(HasShardingOverride(**OpRegistry::Global().Find("relu")));
  o = RunOnMeta({4}, {{{8, 6}, "S(0)"}}, relu);
  EXPECT_EQ(o.sharding, "R");
  EXPECT_EQ(o.comms.count(CommKind::kAllGather), 1);
  ASSERT_TRUE(OpRegistry::Global().RestoreShardingRule("relu").ok());
  o = RunOnMeta({4}, {{{8, 6}, "S(0)"}}, relu);
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  EXPECT_EQ(
      OpRegistry::Global().OverrideShardingRule("conv9d", StrategyFn()).code(),
      absl::StatusCode::kNotFound);
  EXPECT_FALSE(OpRegistry::Global().OverrideShardingRule("relu", {}).ok());
}

}  // namespace
}  // namespace dtensor
