// The norm ops on DTensors (rms_norm, layer_norm): randomized property tests
// (random meshes, even and uneven shards, nested orders, Partial inputs)
// against the tensor layer on the gathered inputs; and the layouts users
// expect, with communication counted.
#include "dtensor/ops/norm_ops.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/comm_counter.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOnRandomLayouts;
using testing_util::CheckRandomStrategies;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

// The norms divide by a spread that can be small.
constexpr double kNormTol = 1e-3;

// ---- Property tests: random layouts through the typed functions, and
// every strategy of the registry op. ----

void CheckNormOp(uint32_t seed, const testing_util::OpCallMaker& make) {
  absl::Status status =
      CheckOnRandomLayouts(seed, 4, 10, make, kNormTol, kNormTol);
  EXPECT_TRUE(status.ok()) << status;
  status = CheckRandomStrategies(seed + 1000, 12, 24, make, kNormTol, kNormTol);
  EXPECT_TRUE(status.ok()) << status;
}

OpCall NormCall(bool layer_norm, std::mt19937& rng) {
  const Shape shape = RandomShape(1 + rng() % 3, 6, rng);
  const DType dtype = rng() % 3 == 0 ? DType::kF64 : DType::kF32;
  const Shape param = {shape.back()};
  const double eps = rng() % 2 == 0 ? 1e-5 : 0.1;
  OpCall c;
  c.op = layer_norm ? "layer_norm" : "rms_norm";
  c.description = absl::StrCat(c.op, " eps ", eps);
  c.inputs = {
      RandomTensor(shape, dtype, -3, 3, rng),
      rng() % 3 != 0 ? RandomTensor(param, dtype, 0.5, 2, rng) : Tensor()};
  if (layer_norm) {
    c.inputs.push_back(rng() % 3 != 0 ? RandomTensor(param, dtype, -1, 1, rng)
                                      : Tensor());
  }
  c.args.AddScalar(eps);
  c.call = OneOutput([layer_norm, eps](const In& in) {
    return layer_norm ? ops::LayerNorm(in[0], in[1], in[2], eps)
                      : ops::RmsNorm(in[0], in[1], eps);
  });
  c.reference = OneReference([layer_norm, eps](const Full& in) {
    return layer_norm ? LayerNorm(in[0], in[1], in[2], eps)
                      : RmsNorm(in[0], in[1], eps);
  });
  return c;
}

TEST(NormPropertyTest, RmsNormMatchesTheTensorLayer) {
  CheckNormOp(3, [](std::mt19937& rng) { return NormCall(false, rng); });
}

TEST(NormPropertyTest, LayerNormMatchesTheTensorLayer) {
  CheckNormOp(4, [](std::mt19937& rng) { return NormCall(true, rng); });
}

TEST(NormCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {"rms_norm", "layer_norm"};
  for (const OpDef* op : ops::NormOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- The layouts users expect. ----

TEST(NormLayoutTest, NormsRunOnSequenceShardsWithReplicatedWeights) {
  const auto layer_norm = [](const In& in) {
    return ops::LayerNorm(in[0], in[1], in[2]);
  };
  MetaOutcome o = RunOnMeta(
      {4}, {{{2, 8, 16}, "S(1)"}, {{16}, "R"}, {{16}, "R"}}, layer_norm);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.layout, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // The normalized dim cannot stay sharded.
  o = RunOnMeta({4}, {{{2, 8, 16}, "S(2)"}, {{16}, "R"}, {{16}, "R"}},
                layer_norm);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_NE(o.layout, "S(2)");
  EXPECT_GE(o.comms.total_collectives(), 1);
  // A Partial weight with a replicated x gives a Partial output.
  o = RunOnMeta({4}, {{{2, 8, 16}, "R"}, {{16}, "P"}},
                [](const In& in) { return ops::RmsNorm(in[0], in[1]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.layout, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

// ---- Errors. ----

TEST(NormErrorTest, BadInputsAreErrorsNamingTheValue) {
  const MetaOutcome o =
      RunOnMeta({2}, {{{4, 3}, "R"}, {{4}, "R"}},
                [](const In& in) { return ops::RmsNorm(in[0], in[1]); });
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("[4]"), std::string::npos) << o.status;
}

}  // namespace
}  // namespace dtensor
