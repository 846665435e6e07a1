// The norm ops on DTensors (rms_norm, layer_norm): randomized property tests
// (random meshes, even and uneven shards, nested orders, Partial inputs)
// against the tensor layer on the gathered inputs; and the layouts users
// expect, with communication counted.
#include "dtensor/ops/norm_ops.h"

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/comm_counter.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
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

// `typed` draws calls of the typed function, `registry` (when given) the
// same calls with the reference of every output of the registry op.
void CheckNormOp(uint32_t seed, const testing_util::OpCallMaker& typed,
                 const testing_util::OpCallMaker& registry = nullptr) {
  const absl::Status status = CheckOpProperties(
      seed, typed, kNormTol, {4, 10, /*strategy_calls=*/12}, registry);
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

// The backward ops: through the typed functions (`registry` false: the
// outputs of the present parameters) or the registry op (every output, an
// absent parameter's gradient [0]), against the tensor layer's fused kernel.
OpCall NormBackwardCall(bool layer_norm, bool registry, std::mt19937& rng) {
  const Shape shape = RandomShape(1 + rng() % 3, 6, rng);
  const DType dtype = rng() % 3 == 0 ? DType::kF64 : DType::kF32;
  const Shape param = {shape.back()};
  const double eps = rng() % 2 == 0 ? 1e-5 : 0.1;
  const bool with_weight = rng() % 3 != 0;
  const bool with_bias = layer_norm && rng() % 2 == 0;
  OpCall c;
  c.op = layer_norm ? "layer_norm_backward" : "rms_norm_backward";
  c.description = absl::StrCat(c.op, " eps ", eps, with_weight ? " weight" : "",
                               with_bias ? " bias" : "");
  c.inputs = {RandomTensor(shape, dtype, -3, 3, rng),
              RandomTensor(shape, dtype, -1, 1, rng),
              with_weight ? RandomTensor(param, dtype, 0.5, 2, rng) : Tensor()};
  c.args.AddScalar(eps);
  if (layer_norm) c.args.AddBool(with_bias);
  c.call = [=](const In& in) -> absl::StatusOr<std::vector<DTensor>> {
    // layer_norm_backward reads only whether there is a bias: the weight's
    // place stands for it.
    absl::StatusOr<ops::NormGradients> grads =
        layer_norm
            ? ops::LayerNormBackward(in[0], in[2],
                                     with_bias ? in[0] : DTensor(), in[1], eps)
            : ops::RmsNormBackward(in[0], in[2], in[1], eps);
    if (!grads.ok()) return grads.status();
    std::vector<DTensor> out = {grads->dx};
    if (with_weight) out.push_back(grads->dweight);
    if (with_bias) out.push_back(grads->dbias);
    return out;
  };
  c.reference = [=](const Full& in) -> absl::StatusOr<std::vector<Tensor>> {
    absl::StatusOr<NormGrads> grads =
        NormBackward(in[0], in[2], in[1], eps, layer_norm, with_bias);
    if (!grads.ok()) return grads.status();
    const Tensor empty = *Tensor::Empty({0}, in[0].dtype());
    std::vector<Tensor> out = {grads->dx};
    if (with_weight || registry) {
      out.push_back(with_weight ? grads->dweight : empty);
    }
    if (with_bias || (registry && layer_norm)) {
      out.push_back(with_bias ? grads->dbias : empty);
    }
    return out;
  };
  return c;
}

TEST(NormPropertyTest, RmsNormBackwardMatchesTheTensorLayer) {
  CheckNormOp(
      7, [](std::mt19937& rng) { return NormBackwardCall(false, false, rng); },
      [](std::mt19937& rng) { return NormBackwardCall(false, true, rng); });
}

TEST(NormPropertyTest, LayerNormBackwardMatchesTheTensorLayer) {
  CheckNormOp(
      8, [](std::mt19937& rng) { return NormBackwardCall(true, false, rng); },
      [](std::mt19937& rng) { return NormBackwardCall(true, true, rng); });
}

// The gradients with x and grad sharded on their leading dims (uneven
// blocks, nested mesh dims), against the tensor layer on one rank.
TEST(NormPropertyTest, BackwardOnLeadingDimShardsMatchesOneRank) {
  std::mt19937 rng(9);
  const Placement r = Placement::Replicate();
  const testing_util::TestSharding rows_by_both = {
      {Placement::Shard(0), Placement::Shard(1)}, {}};
  const testing_util::TestSharding batch_nested = {
      {Placement::Shard(0), Placement::Shard(0)}, {{1, 0}, {}, {}}};
  const testing_util::TestSharding replicate = {{r, r}, {}};
  for (bool layer_norm : {false, true}) {
    for (const testing_util::TestSharding& rows :
         {rows_by_both, batch_nested}) {
      testing_util::OpCase c;
      c.description = absl::StrCat(layer_norm ? "layer_norm" : "rms_norm",
                                   " rows ", rows.ToString());
      c.inputs = {RandomTensor({5, 3, 8}, DType::kF64, -3, 3, rng),
                  RandomTensor({5, 3, 8}, DType::kF64, -1, 1, rng),
                  RandomTensor({8}, DType::kF64, 0.5, 2, rng)};
      c.shardings = {rows, rows, replicate};
      const absl::Status status = testing_util::CheckCases(
          {2, 2}, {c},
          [layer_norm](const In& in) -> absl::StatusOr<std::vector<DTensor>> {
            absl::StatusOr<ops::NormGradients> grads =
                layer_norm ? ops::LayerNormBackward(in[0], in[2], in[2], in[1])
                           : ops::RmsNormBackward(in[0], in[2], in[1]);
            if (!grads.ok()) return grads.status();
            std::vector<DTensor> out = {grads->dx, grads->dweight};
            if (layer_norm) out.push_back(grads->dbias);
            return out;
          },
          [layer_norm](const Full& in) -> absl::StatusOr<std::vector<Tensor>> {
            absl::StatusOr<NormGrads> grads =
                layer_norm ? LayerNormBackward(in[0], in[2], in[2], in[1])
                           : RmsNormBackward(in[0], in[2], in[1]);
            if (!grads.ok()) return grads.status();
            std::vector<Tensor> out = {grads->dx, grads->dweight};
            if (layer_norm) out.push_back(grads->dbias);
            return out;
          },
          1e-12, 1e-12);
      EXPECT_TRUE(status.ok()) << status;
    }
  }
}

TEST(NormCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {
      "rms_norm", "layer_norm", "rms_norm_backward", "layer_norm_backward"};
  for (const OpDef* op : ops::NormOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- The layouts users expect. ----

TEST(NormShardingTest, NormsRunOnSequenceShardsWithReplicatedWeights) {
  const auto layer_norm = [](const In& in) {
    return ops::LayerNorm(in[0], in[1], in[2]);
  };
  MetaOutcome o = RunOnMeta(
      {4}, {{{2, 8, 16}, "S(1)"}, {{16}, "R"}, {{16}, "R"}}, layer_norm);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // The normalized dim cannot stay sharded.
  o = RunOnMeta({4}, {{{2, 8, 16}, "S(2)"}, {{16}, "R"}, {{16}, "R"}},
                layer_norm);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_NE(o.sharding, "S(2)");
  EXPECT_GE(o.comms.total_collectives(), 1);
  // A Partial weight with a replicated x gives a Partial output.
  o = RunOnMeta({4}, {{{2, 8, 16}, "R"}, {{16}, "P"}},
                [](const In& in) { return ops::RmsNorm(in[0], in[1]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

// Output `output` (0 dx, 1 dweight, 2 dbias) of the typed backward function;
// inputs x, grad, weight (which also stands for layer_norm's bias).
std::function<absl::StatusOr<DTensor>(const In&)> BackwardOutput(
    bool layer_norm, int output) {
  return [=](const In& in) -> absl::StatusOr<DTensor> {
    absl::StatusOr<ops::NormGradients> grads =
        layer_norm ? ops::LayerNormBackward(in[0], in[2], in[2], in[1])
                   : ops::RmsNormBackward(in[0], in[2], in[1]);
    if (!grads.ok()) return grads.status();
    return output == 0   ? grads->dx
           : output == 1 ? grads->dweight
                         : grads->dbias;
  };
}

TEST(NormShardingTest, BackwardOnRowShardsGivesPartialParameterGradients) {
  for (bool layer_norm : {false, true}) {
    SCOPED_TRACE(layer_norm ? "layer_norm" : "rms_norm");
    // Sequence parallel: [batch, seq, hidden] sharded on seq.
    const std::vector<testing_util::MetaInput> sequence = {
        {{2, 8, 16}, "S(1)"}, {{2, 8, 16}, "S(1)"}, {{16}, "R"}};
    MetaOutcome o = RunOnMeta({4}, sequence, BackwardOutput(layer_norm, 0));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(1)");
    EXPECT_THAT(o.comms, IssuedNoCollectives());
    for (int param = 1; param <= (layer_norm ? 2 : 1); ++param) {
      o = RunOnMeta({4}, sequence, BackwardOutput(layer_norm, param));
      ASSERT_TRUE(o.status.ok()) << o.status;
      EXPECT_EQ(o.sharding, "P(sum)");
      EXPECT_THAT(o.comms, IssuedNoCollectives());
    }
    // dp x tp: rows sharded by batch and sequence.
    const std::vector<testing_util::MetaInput> both = {
        {{4, 8, 16}, "S(0),S(1)"}, {{4, 8, 16}, "S(0),S(1)"}, {{16}, "R,R"}};
    o = RunOnMeta({2, 2}, both, BackwardOutput(layer_norm, 0));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(0),S(1)");
    EXPECT_THAT(o.comms, IssuedNoCollectives());
    o = RunOnMeta({2, 2}, both, BackwardOutput(layer_norm, 1));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "P(sum),P(sum)");
    // The normalized dim cannot stay sharded.
    o = RunOnMeta({4},
                  {{{2, 8, 16}, "S(2)"}, {{2, 8, 16}, "S(2)"}, {{16}, "R"}},
                  BackwardOutput(layer_norm, 0));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_NE(o.sharding, "S(2)");
    EXPECT_GE(o.comms.total_collectives(), 1);
  }
}

// ---- Errors. ----

TEST(NormErrorTest, BadInputsAreErrorsNamingTheValue) {
  const MetaOutcome o =
      RunOnMeta({2}, {{{4, 3}, "R"}, {{4}, "R"}},
                [](const In& in) { return ops::RmsNorm(in[0], in[1]); });
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("[4]"), std::string::npos) << o.status;
  for (bool layer_norm : {false, true}) {
    const MetaOutcome bad_grad =
        RunOnMeta({2}, {{{4, 3}, "R"}, {{4, 2}, "R"}, {{3}, "-"}},
                  BackwardOutput(layer_norm, 0));
    ASSERT_FALSE(bad_grad.status.ok());
    EXPECT_NE(bad_grad.status.message().find("[4, 2]"), std::string::npos)
        << bad_grad.status;
    EXPECT_NE(bad_grad.status.message().find("norm_backward"),
              std::string::npos)
        << bad_grad.status;
  }
}

}  // namespace
}  // namespace dtensor
