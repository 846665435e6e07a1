// The nn ops on DTensors (softmax, log_softmax, rotary_embedding) and the
// attention family (scaled_dot_product_attention, dtensor/ops/attention_ops.h):
// randomized property tests
// (random meshes, even and uneven shards, nested orders, Partial inputs)
// against the tensor layer on the gathered inputs; and the layouts users
// expect, with communication counted.
#include "dtensor/ops/nn_ops.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/attention_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/registry.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/nn_functional.h"
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
using testing_util::ReferenceCall;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

constexpr double kTol = 1e-4;

DType RandomFloat(std::mt19937& rng) {
  return rng() % 3 == 0 ? DType::kF64 : DType::kF32;
}

// A dim of a rank-`rank` tensor, negative half the time (0 or -1 for 0-d).
int64_t RandomDim(int64_t rank, std::mt19937& rng) {
  if (rank == 0) return rng() % 2 == 0 ? 0 : -1;
  return static_cast<int64_t>(rng() % (2 * rank)) - rank;
}

// `shape` with leading dims dropped and dims set to 1 at random.
Shape BroadcastingShape(const Shape& shape, std::mt19937& rng) {
  const size_t drop = rng() % 3 == 0 ? rng() % (shape.size() + 1) : 0;
  Shape out(shape.begin() + drop, shape.end());
  for (int64_t& size : out) {
    if (rng() % 4 == 0) size = 1;
  }
  return out;
}

Shape Concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- Property tests: random layouts through the typed functions, and
// every strategy of the registry op. ----

// Both checks of one op.
void CheckOp(uint32_t seed, const testing_util::OpCallMaker& make, double tol) {
  const absl::Status status =
      CheckOpProperties(seed, make, tol, {4, 10, /*strategy_calls=*/12});
  EXPECT_TRUE(status.ok()) << status;
}

OpCall SoftmaxCall(bool log, std::mt19937& rng) {
  const Shape shape = RandomShape(rng() % 4, 6, rng);
  const int64_t dim = RandomDim(static_cast<int64_t>(shape.size()), rng);
  OpCall c;
  c.op = log ? "log_softmax" : "softmax";
  c.description = absl::StrCat(c.op, " dim ", dim);
  c.inputs = {RandomTensor(shape, RandomFloat(rng), -3, 3, rng)};
  c.args.AddInt(dim);
  c.call = OneOutput([log, dim](const In& in) {
    return log ? ops::LogSoftmax(in[0], dim) : ops::Softmax(in[0], dim);
  });
  c.reference = OneReference([log, dim](const Full& in) {
    return log ? LogSoftmax(in[0], dim) : Softmax(in[0], dim);
  });
  return c;
}

TEST(NnPropertyTest, SoftmaxMatchesTheTensorLayer) {
  CheckOp(
      1, [](std::mt19937& rng) { return SoftmaxCall(false, rng); }, kTol);
}

TEST(NnPropertyTest, LogSoftmaxMatchesTheTensorLayer) {
  CheckOp(
      2, [](std::mt19937& rng) { return SoftmaxCall(true, rng); }, kTol);
}

// Random attention inputs: broadcast batch dims, Lq and Lk from 0, E != Ev,
// the mask and the scale.
struct AttentionDraw {
  std::vector<Tensor> inputs;
  bool causal;
  double scale;
};

AttentionDraw DrawAttention(std::mt19937& rng) {
  const Shape batch = RandomShape(rng() % 3, 3, rng);
  const int64_t lq = rng() % 8 == 0 ? 0 : 1 + rng() % 5;
  const int64_t lk = rng() % 5;
  const int64_t e = 1 + rng() % 4;
  const int64_t ev = 1 + rng() % 4;
  const Shape k_batch = BroadcastingShape(batch, rng);
  const Shape v_batch =
      rng() % 2 == 0 ? k_batch : BroadcastingShape(batch, rng);
  const DType dtype = RandomFloat(rng);
  AttentionDraw d;
  d.causal = rng() % 2 == 0;
  d.scale = rng() % 2 == 0 ? 0.0 : 0.5;
  d.inputs = {RandomTensor(Concat(BroadcastingShape(batch, rng), {lq, e}),
                           dtype, -1, 1, rng),
              RandomTensor(Concat(k_batch, {lk, e}), dtype, -1, 1, rng),
              RandomTensor(Concat(v_batch, {lk, ev}), dtype, -1, 1, rng)};
  return d;
}

// The forward through ops::ScaledDotProductAttention (its output); with
// `lse`, the registry op's two outputs: the output and the saved
// log-sum-exps, against the tensor layer's on the full inputs.
OpCall AttentionCall(bool lse, std::mt19937& rng) {
  const AttentionDraw d = DrawAttention(rng);
  const bool causal = d.causal;
  const double scale = d.scale;
  OpCall c;
  c.op = "scaled_dot_product_attention";
  c.description = absl::StrCat(c.op, " causal ", causal, " scale ", scale);
  c.inputs = d.inputs;
  c.args.AddBool(causal).AddScalar(scale);
  c.call = OneOutput([causal, scale](const In& in) {
    return ops::ScaledDotProductAttention(in[0], in[1], in[2], causal, scale);
  });
  c.reference = OneReference([causal, scale](const Full& in) {
    return ScaledDotProductAttention(in[0], in[1], in[2], causal, scale);
  });
  if (lse) {
    c.reference = [causal, scale](const Full& in) -> absl::StatusOr<Full> {
      DT_ASSIGN_OR_RETURN(
          AttentionWithLse r,
          ScaledDotProductAttentionWithLse(in[0], in[1], in[2], causal, scale));
      return Full{r.out, r.lse};
    };
  }
  return c;
}

TEST(NnPropertyTest, AttentionMatchesTheTensorLayer) {
  const absl::Status status = CheckOpProperties(
      5, [](std::mt19937& rng) { return AttentionCall(false, rng); }, kTol,
      {4, 10, /*strategy_calls=*/12},
      [](std::mt19937& rng) { return AttentionCall(true, rng); });
  EXPECT_TRUE(status.ok()) << status;
}

// The tensor layer's backward as a reference of the three gradients.
ReferenceCall AttentionGradsReference(bool causal, double scale) {
  return [causal,
          scale](const Full& in) -> absl::StatusOr<std::vector<Tensor>> {
    DT_ASSIGN_OR_RETURN(AttentionGrads grads,
                        ScaledDotProductAttentionBackward(
                            in[0], in[1], in[2], in[3], in[4], causal, scale));
    return std::vector<Tensor>{grads.dq, grads.dk, grads.dv};
  };
}

// The backward op on random attention inputs, the forward's output and a
// random output gradient, against the tensor layer's backward (which
// recomputes the rows' log-sum-exps); with `lse`, given the forward's lse (in
// random layouts of its own, Partial terms included): the saved-lse
// backward must give the recomputing one's gradients.
OpCall AttentionBackwardCall(bool lse, std::mt19937& rng) {
  const AttentionDraw d = DrawAttention(rng);
  const bool causal = d.causal;
  const double scale = d.scale;
  const AttentionWithLse forward = *ScaledDotProductAttentionWithLse(
      d.inputs[0], d.inputs[1], d.inputs[2], causal, scale);
  OpCall c;
  c.op = "scaled_dot_product_attention_backward";
  c.description = absl::StrCat(c.op, " causal ", causal, " scale ", scale,
                               lse ? " saved lse" : "");
  c.inputs = d.inputs;
  c.inputs.push_back(forward.out);
  c.inputs.push_back(
      RandomTensor(forward.out.shape(), forward.out.dtype(), -1, 1, rng));
  if (lse) c.inputs.push_back(forward.lse);
  c.args.AddBool(causal).AddScalar(scale);
  c.call = [causal, scale](const In& in) {
    return ops::ScaledDotProductAttentionBackwardWithLse(
        in[0], in[1], in[2], in[3], in[4], in.size() > 5 ? in[5] : DTensor(),
        causal, scale);
  };
  c.reference = AttentionGradsReference(causal, scale);
  return c;
}

TEST(NnPropertyTest, AttentionBackwardMatchesTheTensorLayer) {
  CheckOp(
      7, [](std::mt19937& rng) { return AttentionBackwardCall(false, rng); },
      kTol);
}

TEST(NnPropertyTest, AttentionBackwardWithSavedLseMatchesRecomputing) {
  CheckOp(
      17, [](std::mt19937& rng) { return AttentionBackwardCall(true, rng); },
      kTol);
}

// Every strategy of the backward op on a causal call with Lq < Lk sharded
// unevenly over 4 ranks among them (each rank narrows the keys to those of
// its queries, dk and dv Partial(sum)), grouped-query k and v.
TEST(NnPropertyTest, AttentionBackwardEveryStrategyWithCausalQueryShards) {
  std::mt19937 rng(8);
  testing_util::StrategyCase c;
  const absl::StatusOr<const OpDef*> op =
      OpRegistry::Builtin().Find("scaled_dot_product_attention_backward");
  ASSERT_TRUE(op.ok()) << op.status();
  c.op = *op;
  c.inputs = {RandomTensor({2, 3, 10, 4}, DType::kF64, -1, 1, rng),
              RandomTensor({2, 1, 13, 4}, DType::kF64, -1, 1, rng),
              RandomTensor({2, 1, 13, 3}, DType::kF64, -1, 1, rng)};
  const Tensor out =
      *ScaledDotProductAttention(c.inputs[0], c.inputs[1], c.inputs[2], true);
  c.inputs.push_back(out);
  c.inputs.push_back(RandomTensor(out.shape(), DType::kF64, -1, 1, rng));
  c.args.AddBool(true).AddScalar(0);
  c.reference = AttentionGradsReference(true, 0);
  c.description = "causal, q [2, 3, 10, 4], k [2, 1, 13, 4]";
  for (const bool saved_lse : {false, true}) {
    if (saved_lse) {
      c.inputs.push_back(ScaledDotProductAttentionWithLse(
                             c.inputs[0], c.inputs[1], c.inputs[2], true)
                             ->lse);
      c.description += ", saved lse";
    }
    for (const std::vector<int64_t>& mesh :
         {std::vector<int64_t>{4}, std::vector<int64_t>{2, 2}}) {
      const absl::Status status =
          testing_util::CheckEveryStrategy(mesh, c, 1 << 10, 9, kTol, kTol);
      EXPECT_TRUE(status.ok()) << status;
    }
  }
}

// The reference of an inverse rotation rotates by the negated positions
// (explicit, through the tensor layer's host tables).
OpCall RotaryCall(std::mt19937& rng) {
  const int64_t seq = rng() % 8 == 0 ? 0 : 1 + rng() % 7;
  const Shape shape = Concat(RandomShape(rng() % 3, 3, rng),
                             {seq, 1 + static_cast<int64_t>(rng() % 3),
                              2 * (1 + static_cast<int64_t>(rng() % 3))});
  const bool with_positions = rng() % 2 == 0;
  const double theta = rng() % 2 == 0 ? 10000.0 : 500.0;
  const bool inverse = rng() % 2 == 0;
  OpCall c;
  c.op = "rotary_embedding";
  c.description =
      absl::StrCat(c.op, " theta ", theta, inverse ? " inverse" : "");
  c.inputs = {
      RandomTensor(shape, RandomFloat(rng), -2, 2, rng),
      with_positions
          ? RandomTensor({seq}, rng() % 2 == 0 ? DType::kI64 : DType::kI32, 0,
                         20, rng)
          : Tensor()};
  c.args.AddScalar(theta).AddBool(inverse);
  c.call = OneOutput([theta, inverse](const In& in) {
    return ops::RotaryEmbedding(in[0], in[1], theta, inverse);
  });
  c.reference = OneReference([seq, theta, inverse](
                                 const Full& in) -> absl::StatusOr<Tensor> {
    Tensor positions = in[1];
    if (!positions.defined()) {
      DT_ASSIGN_OR_RETURN(positions, Tensor::Arange(0, static_cast<double>(seq),
                                                    1, DType::kI64));
    }
    if (inverse) {
      DT_ASSIGN_OR_RETURN(positions, Neg(positions));
    }
    return RotaryEmbedding(in[0], positions, theta);
  });
  return c;
}

TEST(NnPropertyTest, RotaryEmbeddingMatchesTheTensorLayer) {
  CheckOp(6, RotaryCall, kTol);
}

TEST(NnCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {
      "softmax", "log_softmax", "scaled_dot_product_attention",
      "scaled_dot_product_attention_backward", "rotary_embedding"};
  for (const auto& family : {ops::NnOps(), ops::AttentionOps()}) {
    for (const OpDef* op : family) {
      EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
    }
  }
}

// ---- The layouts users expect. ----

TEST(NnShardingTest, SoftmaxOverAShardedDimMovesItsShardsAway) {
  for (bool log : {false, true}) {
    const auto softmax = [log](int64_t dim) {
      return [log, dim](const In& in) {
        return log ? ops::LogSoftmax(in[0], dim) : ops::Softmax(in[0], dim);
      };
    };
    // The softmax dim is gathered; all-to-all onto the other dim is the
    // cheapest way there.
    MetaOutcome o = RunOnMeta({4}, {{{8, 6}, "S(1)"}}, softmax(1));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(0)");
    EXPECT_EQ(o.comms.count(CommKind::kAllToAll), 1);
    EXPECT_EQ(o.comms.total_collectives(), 1);
    // With no other dim to move to: an all-gather.
    o = RunOnMeta({4}, {{{8}, "S(0)"}}, softmax(0));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "R");
    EXPECT_EQ(o.comms.count(CommKind::kAllGather), 1);
    EXPECT_EQ(o.comms.total_collectives(), 1);
    // Other dims stay sharded, nested orders included.
    o = RunOnMeta({2, 2}, {{{8, 6, 5}, "S(0)[1],S(0)[0]"}}, softmax(-1));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(0)[1],S(0)[0]");
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
}

TEST(NnShardingTest, AttentionShardedOnHeadsOrBatchDoesNotCommunicate) {
  for (bool causal : {false, true}) {
    const auto attention = [causal](const In& in) {
      return ops::ScaledDotProductAttention(in[0], in[1], in[2], causal);
    };
    const Shape qkv = {2, 4, 8, 16};  // [batch, heads, seq, head_dim]
    for (const char* sharding : {"S(1)", "S(0)"}) {
      const MetaOutcome o = RunOnMeta(
          {2}, {{qkv, sharding}, {qkv, sharding}, {qkv, sharding}}, attention);
      ASSERT_TRUE(o.status.ok()) << o.status;
      EXPECT_EQ(o.sharding, sharding);
      EXPECT_THAT(o.comms, IssuedNoCollectives());
    }
    MetaOutcome o = RunOnMeta(
        {2, 2}, {{qkv, "S(0),S(1)"}, {qkv, "S(0),S(1)"}, {qkv, "S(0),S(1)"}},
        attention);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(0),S(1)");
    EXPECT_THAT(o.comms, IssuedNoCollectives());
    // Queries sharded on the sequence, keys and values whole.
    o = RunOnMeta({4}, {{qkv, "S(2)"}, {qkv, "R"}, {qkv, "R"}}, attention);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(2)");
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
}

// The saved log-sum-exps (the registry op's output 1) of q, k, v laid out by
// `q`, `k`, `v` (metadata only), checked for their shape [2, 4, 8] and the
// lse dtype of `dtype`.
MetaOutcome LseOnMeta(const std::vector<int64_t>& mesh, const std::string& q,
                      const std::string& k, const std::string& v,
                      DType dtype = DType::kF32) {
  const Shape qkv = {2, 4, 8, 16};  // [batch, heads, seq, head_dim]
  return RunOnMeta(
      mesh, {{qkv, q, dtype}, {qkv, k, dtype}, {qkv, v, dtype}},
      [dtype](const In& in) -> absl::StatusOr<DTensor> {
        DT_ASSIGN_OR_RETURN(
            const OpDef* op,
            OpRegistry::Builtin().Find("scaled_dot_product_attention"));
        const DTensor* inputs[] = {&in[0], &in[1], &in[2]};
        OpArgs args;
        args.AddBool(true).AddScalar(0);
        DT_ASSIGN_OR_RETURN(OpOutputs out, Dispatch(*op, inputs, args));
        const DTensor& lse = out[1];
        if (lse.shape() != Shape{2, 4, 8} ||
            lse.dtype() != AttentionLseDType(dtype)) {
          return absl::InternalError(
              absl::StrCat("lse ", std::string(DTypeName(lse.dtype())), " ",
                           ShapeToString(lse.shape())));
        }
        return lse;
      });
}

// The lse follows the queries' batch, head and sequence shards; where v's
// head dim is sharded or v is Partial (the output then sharded on Ev or
// Partial) it is Replicate, never Partial.
TEST(NnShardingTest, SavedLseFollowsTheQueryRows) {
  const std::string cases[][5] = {
      // q, k, v, the lse, the dtype (f32 unless "f64", "bf16").
      {"S(0)", "S(0)", "S(0)", "S(0)", ""},
      {"S(1)", "S(1)", "S(1)", "S(1)", "f64"},
      {"S(2)", "R", "R", "S(2)", "bf16"},
      {"R", "R", "S(3)", "R", ""},
      {"R", "R", "P(sum)", "R", ""},
  };
  for (const auto& c : cases) {
    const DType dtype = c[4] == "f64"    ? DType::kF64
                        : c[4] == "bf16" ? DType::kBF16
                                         : DType::kF32;
    const MetaOutcome o = LseOnMeta({2}, c[0], c[1], c[2], dtype);
    ASSERT_TRUE(o.status.ok()) << c[0] << " " << o.status;
    EXPECT_EQ(o.sharding, c[3]) << c[0] << " " << c[1] << " " << c[2];
    EXPECT_THAT(o.comms, IssuedNoCollectives()) << c[0];
  }
  const MetaOutcome o =
      LseOnMeta({2, 2}, "S(0),S(1)", "S(0),S(1)", "S(0),S(1)");
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0),S(1)");
}

// The backward op's gradients' layouts, each taken by `pick` (0 dq, 1 dk,
// 2 dv) with q, out and grad_out laid out by `q_sharding` and k, v by
// `kv_sharding`.
MetaOutcome AttentionGradOnMeta(const std::vector<int64_t>& mesh,
                                const Shape& q, const Shape& kv,
                                const std::string& q_sharding,
                                const std::string& kv_sharding, int pick) {
  return RunOnMeta(mesh,
                   {{q, q_sharding},
                    {kv, kv_sharding},
                    {kv, kv_sharding},
                    {q, q_sharding},
                    {q, q_sharding}},
                   [pick](const In& in) -> absl::StatusOr<DTensor> {
                     DT_ASSIGN_OR_RETURN(
                         std::vector<DTensor> grads,
                         ops::ScaledDotProductAttentionBackward(
                             in[0], in[1], in[2], in[3], in[4], true));
                     return grads[pick];
                   });
}

TEST(NnShardingTest, AttentionBackwardKeepsTheForwardsShards) {
  const Shape q = {2, 4, 2, 8, 16};  // [batch, kv heads, group, seq, dim]
  const Shape kv = {2, 4, 1, 8, 16};
  // Heads sharded: every gradient sharded alike, no communication.
  for (int pick : {0, 1, 2}) {
    const MetaOutcome o = AttentionGradOnMeta({2}, q, kv, "S(1)", "S(1)", pick);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "S(1)") << pick;
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
  // The query group sharded (k, v broadcast over it): dk and dv are sums
  // over the group, Partial.
  const std::string by_group[] = {"S(2)", "P(sum)", "P(sum)"};
  for (int pick : {0, 1, 2}) {
    const MetaOutcome o = AttentionGradOnMeta({2}, q, kv, "S(2)", "R", pick);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, by_group[pick]) << pick;
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
  // Queries sharded on the sequence: dq sharded, dk and dv Partial.
  const std::string by_query[] = {"S(3)", "P(sum)", "P(sum)"};
  for (int pick : {0, 1, 2}) {
    const MetaOutcome o = AttentionGradOnMeta({4}, q, kv, "S(3)", "R", pick);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, by_query[pick]) << pick;
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
}

TEST(NnShardingTest, RotaryEmbeddingKeepsSequenceShards) {
  const auto rotary = [](const In& in) { return ops::RotaryEmbedding(in[0]); };
  MetaOutcome o = RunOnMeta({4}, {{{2, 8, 4, 16}, "S(1)"}}, rotary);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // head_dim holds rotation pairs: never sharded.
  o = RunOnMeta({4}, {{{2, 8, 4, 16}, "S(3)"}}, rotary);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_NE(o.sharding, "S(3)");
  EXPECT_GE(o.comms.total_collectives(), 1);
}

// ---- Errors. ----

void ExpectErrorNaming(const MetaOutcome& o, const std::string& text) {
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find(text), std::string::npos) << o.status;
}

TEST(NnErrorTest, BadInputsAreErrorsNamingTheOpAndValue) {
  ExpectErrorNaming(
      RunOnMeta({2}, {{{4, 3}, "R"}},
                [](const In& in) { return ops::Softmax(in[0], 2); }),
      "softmax");
  ExpectErrorNaming(
      RunOnMeta({2}, {{{4, 3}, "R", DType::kI64}},
                [](const In& in) { return ops::Softmax(in[0], 0); }),
      "softmax");
  ExpectErrorNaming(
      RunOnMeta({2}, {{{2, 5, 4}, "R"}, {{2, 6, 3}, "R"}, {{2, 6, 4}, "R"}},
                [](const In& in) {
                  return ops::ScaledDotProductAttention(in[0], in[1], in[2]);
                }),
      "scaled_dot_product_attention");
  ExpectErrorNaming(RunOnMeta({2},
                              {{{2, 5, 4}, "R"},
                               {{2, 6, 4}, "R"},
                               {{2, 6, 3}, "R"},
                               {{2, 5, 2}, "R"},
                               {{2, 5, 3}, "R"}},
                              [](const In& in) -> absl::StatusOr<DTensor> {
                                DT_ASSIGN_OR_RETURN(
                                    std::vector<DTensor> grads,
                                    ops::ScaledDotProductAttentionBackward(
                                        in[0], in[1], in[2], in[3], in[4]));
                                return grads[0];
                              }),
                    "out is f32 [2, 5, 2]");
  ExpectErrorNaming(
      RunOnMeta({2}, {{{2, 5, 3}, "R"}},
                [](const In& in) { return ops::RotaryEmbedding(in[0]); }),
      "[2, 5, 3]");
  ExpectErrorNaming(RunOnMeta({2}, {{{2, 5, 2, 4}, "R"}},
                              [](const In& in) {
                                return ops::RotaryEmbedding(in[0], DTensor(),
                                                            -1);
                              }),
                    "theta");
  ExpectErrorNaming(
      RunOnMeta(
          {2}, {{{2, 5, 2, 4}, "R"}, {{4}, "R", DType::kI64}},
          [](const In& in) { return ops::RotaryEmbedding(in[0], in[1]); }),
      "positions");
}

}  // namespace
}  // namespace dtensor
