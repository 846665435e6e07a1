// cat and stack on DTensors: randomized property tests (random meshes, every
// input in its own random layout, even and uneven shards, Partial inputs)
// against the tensor layer on the gathered inputs, under random layouts and
// under every strategy; the layouts users expect.
#include "dtensor/ops/join_ops.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/comm_counter.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckCases;
using testing_util::CheckOpProperties;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::OpCase;
using testing_util::PartialOpsFor;
using testing_util::RandomShape;
using testing_util::RandomSharding;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

constexpr double kTol = 1e-6;

void CheckOp(uint32_t seed, const testing_util::OpCallMaker& make) {
  const absl::Status status = CheckOpProperties(seed, make, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

OpCall JoinCall(bool stack, std::mt19937& rng) {
  const int64_t rank = 1 + rng() % 3;
  const Shape base = RandomShape(rank, 5, rng);
  const int64_t dims = stack ? rank + 1 : rank;
  const int64_t dim = static_cast<int64_t>(rng() % (2 * dims)) - dims;
  const int64_t d = dim < 0 ? dim + dims : dim;
  const DType dtype = rng() % 3 == 0 ? DType::kI64 : DType::kF32;
  OpCall c;
  c.op = stack ? "stack" : "cat";
  c.description = absl::StrCat(c.op, " dim ", dim);
  for (int k = 1 + rng() % 4; k > 0; --k) {
    Shape shape = base;
    if (!stack) shape[d] = rng() % 5;
    c.inputs.push_back(RandomTensor(shape, dtype, -5, 5, rng));
  }
  c.args.AddInt(dim);
  c.call = OneOutput([stack, dim](const In& in) {
    return stack ? ops::Stack(in, dim) : ops::Cat(in, dim);
  });
  c.reference = OneReference([stack, dim](const Full& in) {
    return stack ? Stack(in, dim) : Cat(in, dim);
  });
  return c;
}

TEST(JoinPropertyTest, CatMatchesTheTensorLayer) {
  CheckOp(41, [](std::mt19937& rng) { return JoinCall(false, rng); });
}

TEST(JoinPropertyTest, StackMatchesTheTensorLayer) {
  CheckOp(42, [](std::mt19937& rng) { return JoinCall(true, rng); });
}

TEST(JoinPropertyTest, LongListsAreJoinedInSeveralCalls) {
  std::mt19937 rng(43);
  for (bool stack : {false, true}) {
    OpCase c;
    c.description = stack ? "stack of 37" : "cat of 37";
    for (int k = 0; k < 37; ++k) {
      const Shape shape = {stack ? 3 : static_cast<int64_t>(rng() % 3), 4};
      c.inputs.push_back(RandomTensor(shape, DType::kF32, -1, 1, rng));
      c.shardings.push_back(
          RandomSharding(2, 2, PartialOpsFor(DType::kF32), rng));
    }
    const absl::Status status =
        CheckCases({2, 2}, {c}, OneOutput([stack](const In& in) {
                     return stack ? ops::Stack(in, 1) : ops::Cat(in, 0);
                   }),
                   OneReference([stack](const Full& in) {
                     return stack ? Stack(in, 1) : Cat(in, 0);
                   }),
                   kTol, kTol);
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(JoinCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {"cat", "stack"};
  for (const OpDef* op : ops::JoinOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- Layouts. ----

TEST(JoinShardingTest, OtherDimsKeepTheirShardsTheJoinedDimIsGathered) {
  const auto cat = [](int64_t dim) {
    return [dim](const In& in) { return ops::Cat(in, dim); };
  };
  MetaOutcome o = RunOnMeta({4}, {{{8, 4}, "S(0)"}, {{8, 6}, "S(0)"}}, cat(1));
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // Along the sharded dim: the shards move first.
  o = RunOnMeta({4}, {{{8, 4}, "S(0)"}, {{8, 4}, "S(0)"}}, cat(0));
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_NE(o.sharding, "S(0)");
  EXPECT_GE(o.comms.total_collectives(), 2);
  // Partials of one op pass through.
  o = RunOnMeta({4}, {{{8, 4}, "P(max)"}, {{8, 4}, "P(max)"}}, cat(0));
  EXPECT_EQ(o.sharding, "P(max)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = RunOnMeta({4}, {{{8, 4}, "S(1)"}, {{8, 4}, "S(1)"}},
                [](const In& in) { return ops::Stack(in, 0); });
  EXPECT_EQ(o.sharding, "S(2)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

TEST(JoinErrorTest, MismatchedInputsAreErrorsNamingTheTensor) {
  MetaOutcome o = RunOnMeta({2}, {{{8, 4}, "R"}, {{7, 5}, "R"}},
                            [](const In& in) { return ops::Cat(in, 1); });
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("tensor 1"), std::string::npos) << o.status;
  o = RunOnMeta({2}, {{{8, 4}, "R"}, {{8, 4}, "R", DType::kI64}},
                [](const In& in) { return ops::Stack(in, 0); });
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("i64"), std::string::npos) << o.status;
  o = RunOnMeta({2}, {{{8, 4}, "R"}},
                [](const In& in) { return ops::Cat(in, 2); });
  EXPECT_FALSE(o.status.ok());
  EXPECT_FALSE(ops::Cat({}, 0).ok());
}

}  // namespace
}  // namespace dtensor
