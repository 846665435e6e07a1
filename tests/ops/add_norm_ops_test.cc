// The fused residual add + RMSNorm on DTensors (add_rms_norm and
// add_rms_norm_backward): randomized property tests (random meshes, even and
// uneven shards, nested orders, Partial inputs) against the tensor layer on
// the gathered inputs (one rank); the tape's gradients against finite
// differences and across random shardings; and the layouts a Llama block
// gives it, with communication counted.
#include "dtensor/ops/add_norm_ops.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/tensor/fused_norm.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/grad_checks.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

// The norm divides by a spread that can be small.
constexpr double kNormTol = 1e-3;

void CheckAddNormOp(uint32_t seed, const testing_util::OpCallMaker& typed) {
  const absl::Status status = CheckOpProperties(
      seed, typed, kNormTol, {4, 10, /*strategy_calls=*/12}, typed);
  EXPECT_TRUE(status.ok()) << status;
}

OpCall ForwardCall(std::mt19937& rng) {
  const Shape shape = RandomShape(1 + rng() % 3, 6, rng);
  const DType dtype = rng() % 3 == 0 ? DType::kF64 : DType::kF32;
  const double eps = rng() % 2 == 0 ? 1e-5 : 0.1;
  OpCall c;
  c.op = "add_rms_norm";
  c.description = absl::StrCat(c.op, " eps ", eps);
  c.inputs = {RandomTensor(shape, dtype, -3, 3, rng),
              RandomTensor(shape, dtype, -1, 1, rng),
              rng() % 3 != 0 ? RandomTensor({shape.back()}, dtype, 0.5, 2, rng)
                             : Tensor()};
  c.args.AddScalar(eps);
  c.call = [eps](const In& in) -> absl::StatusOr<std::vector<DTensor>> {
    absl::StatusOr<ops::AddNormOutputs> out =
        ops::AddRmsNorm(in[0], in[1], in[2], eps);
    if (!out.ok()) return out.status();
    return std::vector<DTensor>{out->sum, out->normed};
  };
  c.reference = [eps](const Full& in) -> absl::StatusOr<std::vector<Tensor>> {
    absl::StatusOr<AddRmsNormOutputs> out =
        AddRmsNorm(in[0], in[1], in[2], eps);
    if (!out.ok()) return out.status();
    return std::vector<Tensor>{out->sum, out->normed};
  };
  return c;
}

TEST(AddNormPropertyTest, AddRmsNormMatchesTheTensorLayer) {
  CheckAddNormOp(21, ForwardCall);
}

// Through the typed function (`registry` false: dweight only with a weight)
// or the registry op (every output, an absent weight's gradient [0]).
OpCall BackwardCall(bool registry, std::mt19937& rng) {
  const Shape shape = RandomShape(1 + rng() % 3, 6, rng);
  const DType dtype = rng() % 3 == 0 ? DType::kF64 : DType::kF32;
  const double eps = rng() % 2 == 0 ? 1e-5 : 0.1;
  const bool with_weight = rng() % 3 != 0;
  const bool with_grad_sum = rng() % 4 != 0;
  OpCall c;
  c.op = "add_rms_norm_backward";
  c.description = absl::StrCat(c.op, " eps ", eps, with_weight ? " weight" : "",
                               with_grad_sum ? " grad_sum" : "");
  c.inputs = {
      RandomTensor(shape, dtype, -3, 3, rng),
      RandomTensor(shape, dtype, -1, 1, rng),
      with_weight ? RandomTensor({shape.back()}, dtype, 0.5, 2, rng) : Tensor(),
      with_grad_sum ? RandomTensor(shape, dtype, -1, 1, rng) : Tensor()};
  c.args.AddScalar(eps);
  c.call = [=](const In& in) -> absl::StatusOr<std::vector<DTensor>> {
    absl::StatusOr<ops::NormGradients> grads =
        ops::AddRmsNormBackward(in[0], in[2], in[1], in[3], eps);
    if (!grads.ok()) return grads.status();
    std::vector<DTensor> out = {grads->dx};
    if (with_weight) out.push_back(grads->dweight);
    return out;
  };
  c.reference = [=](const Full& in) -> absl::StatusOr<std::vector<Tensor>> {
    absl::StatusOr<NormGrads> grads =
        AddRmsNormBackward(in[0], in[2], in[1], in[3], eps);
    if (!grads.ok()) return grads.status();
    std::vector<Tensor> out = {grads->dx};
    if (with_weight) out.push_back(grads->dweight);
    if (registry && !with_weight) {
      out.push_back(*Tensor::Empty({0}, in[0].dtype()));
    }
    return out;
  };
  return c;
}

TEST(AddNormPropertyTest, AddRmsNormBackwardMatchesTheTensorLayer) {
  const absl::Status status = CheckOpProperties(
      22, [](std::mt19937& rng) { return BackwardCall(false, rng); }, kNormTol,
      {4, 10, /*strategy_calls=*/12},
      [](std::mt19937& rng) { return BackwardCall(true, rng); });
  EXPECT_TRUE(status.ok()) << status;
}

// The tape's gradients through add_rms_norm: against finite differences on
// one rank, and on random meshes and shardings against that rank. Each case
// reaches the backward with both output gradients, or with one only.
TEST(AddNormGradTest, GradientsMatchFiniteDifferencesAndOneRank) {
  std::mt19937 rng(23);
  std::vector<testing_util::GradCase> cases;
  for (int use = 0; use < 3; ++use) {
    for (bool with_weight : {true, false}) {
      testing_util::GradCase c;
      c.op = "add_rms_norm";
      c.description =
          absl::StrCat("add_rms_norm use ", use, with_weight ? " weight" : "");
      const Shape shape = {3, 4, 6};
      c.inputs = {
          testing_util::Random64(shape, -2, 2, rng),
          testing_util::Random64(shape, -1, 1, rng),
          with_weight ? testing_util::Random64({6}, 0.5, 1.5, rng) : Tensor()};
      c.fn = [use](const In& in) -> absl::StatusOr<DTensor> {
        absl::StatusOr<ops::AddNormOutputs> out =
            ops::AddRmsNorm(in[0], in[1], in[2], 1e-3);
        if (!out.ok()) return out.status();
        if (use == 0) return ops::Mul(out->sum, out->normed);
        return use == 1 ? out->normed : out->sum;
      };
      cases.push_back(std::move(c));
    }
  }
  const absl::Status status =
      testing_util::CheckGradCases(cases, 24, /*sharding_rounds=*/4, 1e-6);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(AddNormCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {"add_rms_norm",
                                        "add_rms_norm_backward"};
  for (const OpDef* op : ops::AddNormOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- The layouts a Llama block gives it. ----

TEST(AddNormShardingTest, SequenceShardsStaySequenceShardsWithoutComms) {
  // Output `j` of the typed function (0 sum, 1 normed).
  const auto output = [](int j) {
    return [j](const In& in) -> absl::StatusOr<DTensor> {
      absl::StatusOr<ops::AddNormOutputs> out =
          ops::AddRmsNorm(in[0], in[1], in[2]);
      if (!out.ok()) return out.status();
      return j == 0 ? out->sum : out->normed;
    };
  };
  const auto sum = output(0);
  const auto normed = output(1);
  const std::vector<testing_util::MetaInput> sequence = {
      {{2, 8, 16}, "S(1)"}, {{2, 8, 16}, "S(1)"}, {{16}, "R"}};
  for (int j = 0; j < 2; ++j) {
    SCOPED_TRACE(j);
    MetaOutcome o = RunOnMeta({4}, sequence, output(j));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(1)");
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
  // A Partial weight with replicated rows: the sum stays Replicate, the
  // normalized rows are Partial (linear in the weight).
  const std::vector<testing_util::MetaInput> partial_weight = {
      {{2, 8, 16}, "R"}, {{2, 8, 16}, "R"}, {{16}, "P"}};
  MetaOutcome o = RunOnMeta({4}, partial_weight, sum);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "R");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = RunOnMeta({4}, partial_weight, normed);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // The normalized dim cannot stay sharded.
  o = RunOnMeta({4}, {{{2, 8, 16}, "S(2)"}, {{2, 8, 16}, "S(2)"}, {{16}, "R"}},
                normed);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_NE(o.sharding, "S(2)");
  EXPECT_GE(o.comms.total_collectives(), 1);
}

}  // namespace
}  // namespace dtensor
