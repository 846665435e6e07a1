// Gradients of the nn ops (softmax, norms, the fused residual add + RMSNorm,
// rotary embedding), the attention ops and the vocabulary ops (embedding,
// cross entropy): against finite differences in f64 on one rank, and on random
// layouts of in-process meshes against the one-rank gradients
// (dtensor/testing/grad_checks.h). Every op of these families is covered.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/add_norm_ops.h"
#include "dtensor/ops/attention_ops.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/embedding_ops.h"
#include "dtensor/ops/nn_ops.h"
#include "dtensor/ops/norm_ops.h"
#include "dtensor/ops/op_counter.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/runtime.h"
#include "dtensor/testing/grad_checks.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckGradCases;
using testing_util::GradCase;
using testing_util::Random64;
using testing_util::RandomIndices;
using In = std::vector<DTensor>;

constexpr double kTol = 1e-8;

std::vector<GradCase> NnCases() {
  std::mt19937 rng(23);
  std::vector<GradCase> cases;
  for (int64_t dim : {0, -1}) {
    cases.push_back({"softmax",
                     "dim " + std::to_string(dim),
                     {Random64({3, 4}, -2, 2, rng)},
                     [dim](const In& in) { return ops::Softmax(in[0], dim); }});
    cases.push_back(
        {"log_softmax",
         "dim " + std::to_string(dim),
         {Random64({2, 3, 4}, -2, 2, rng)},
         [dim](const In& in) { return ops::LogSoftmax(in[0], dim); }});
  }
  const auto rms = [](const In& in) {
    return ops::RmsNorm(in[0], in[1], 1e-3);
  };
  cases.push_back(
      {"rms_norm",
       "with weight",
       {Random64({2, 3, 4}, -2, 2, rng), Random64({4}, 0.5, 2, rng)},
       rms});
  cases.push_back(
      {"rms_norm", "no weight", {Random64({3, 5}, -2, 2, rng), Tensor()}, rms});
  const auto layer = [](const In& in) {
    return ops::LayerNorm(in[0], in[1], in[2], 1e-3);
  };
  cases.push_back({"layer_norm",
                   "weight and bias",
                   {Random64({2, 3, 4}, -2, 2, rng), Random64({4}, 0.5, 2, rng),
                    Random64({4}, -1, 1, rng)},
                   layer});
  cases.push_back(
      {"layer_norm",
       "bias only",
       {Random64({3, 5}, -2, 2, rng), Tensor(), Random64({5}, -1, 1, rng)},
       layer});
  cases.push_back({"layer_norm",
                   "neither",
                   {Random64({4, 3}, -2, 2, rng), Tensor(), Tensor()},
                   layer});
  struct Attention {
    Shape q, k, v;
    bool causal;
    double scale;
  };
  for (const Attention& a : std::vector<Attention>{
           {{2, 3, 4}, {2, 3, 4}, {2, 3, 2}, false, 0},
           {{2, 3, 4}, {2, 3, 4}, {2, 3, 2}, true, 0},
           // Broadcast batch dims, Lq != Lk.
           {{2, 2, 2, 3}, {1, 4, 3}, {2, 1, 4, 2}, true, 0.7},
           // Causal with Lq > Lk: the first queries see no key.
           {{4, 2}, {2, 2}, {2, 3}, true, 0}}) {
    cases.push_back({"scaled_dot_product_attention",
                     "q " + ShapeToString(a.q) + " k " + ShapeToString(a.k) +
                         " v " + ShapeToString(a.v) +
                         (a.causal ? " causal" : ""),
                     {Random64(a.q, -1, 1, rng), Random64(a.k, -1, 1, rng),
                      Random64(a.v, -1, 1, rng)},
                     [a](const In& in) {
                       return ops::ScaledDotProductAttention(
                           in[0], in[1], in[2], a.causal, a.scale);
                     }});
  }
  // The backward op differentiated itself (its inputs: q, k, v, out,
  // grad_out, any values), one output at a time.
  for (int pick : {0, 1, 2}) {
    cases.push_back(
        {"scaled_dot_product_attention_backward",
         "causal, broadcast batch, output " + std::to_string(pick),
         {Random64({2, 3, 3}, -1, 1, rng), Random64({1, 4, 3}, -1, 1, rng),
          Random64({2, 4, 2}, -1, 1, rng), Random64({2, 3, 2}, -1, 1, rng),
          Random64({2, 3, 2}, -1, 1, rng)},
         [pick](const In& in) -> absl::StatusOr<DTensor> {
           DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                               ops::ScaledDotProductAttentionBackward(
                                   in[0], in[1], in[2], in[3], in[4],
                                   /*causal=*/true, 0.8));
           return grads[pick];
         }});
  }
  const auto rotary = [](const In& in) {
    return ops::RotaryEmbedding(in[0], in[1], 500.0);
  };
  cases.push_back({"rotary_embedding",
                   "default positions",
                   {Random64({2, 5, 2, 4}, -1, 1, rng), Tensor()},
                   rotary});
  cases.push_back({"rotary_embedding",
                   "given i32 positions",
                   {Random64({4, 1, 6}, -1, 1, rng),
                    RandomIndices({4}, 30, DType::kI32, rng)},
                   rotary});
  // The backward ops' own gradients, through dx and the parameter gradients
  // at once (dweight and dbias broadcast over the rows of dx).
  const auto rms_backward = [](const In& in) -> absl::StatusOr<DTensor> {
    DT_ASSIGN_OR_RETURN(ops::NormGradients grads,
                        ops::RmsNormBackward(in[0], in[2], in[1], 1e-3));
    if (!grads.dweight.defined()) return grads.dx;
    return ops::Add(grads.dx, grads.dweight);
  };
  cases.push_back(
      {"rms_norm_backward",
       "with weight",
       {Random64({2, 3, 4}, -2, 2, rng), Random64({2, 3, 4}, -1, 1, rng),
        Random64({4}, 0.5, 2, rng)},
       rms_backward});
  cases.push_back(
      {"rms_norm_backward",
       "no weight",
       {Random64({3, 5}, -2, 2, rng), Random64({3, 5}, -1, 1, rng), Tensor()},
       rms_backward});
  // The fused residual add + RMSNorm through both its outputs, and its
  // backward's own gradients (grad_sum's included).
  const auto add_rms = [](const In& in) -> absl::StatusOr<DTensor> {
    DT_ASSIGN_OR_RETURN(ops::AddNormOutputs out,
                        ops::AddRmsNorm(in[0], in[1], in[2], 1e-3));
    return ops::Add(out.sum, out.normed);
  };
  cases.push_back(
      {"add_rms_norm",
       "with weight",
       {Random64({2, 3, 4}, -2, 2, rng), Random64({2, 3, 4}, -1, 1, rng),
        Random64({4}, 0.5, 2, rng)},
       add_rms});
  const auto add_rms_backward = [](const In& in) -> absl::StatusOr<DTensor> {
    DT_ASSIGN_OR_RETURN(
        ops::NormGradients grads,
        ops::AddRmsNormBackward(in[0], in[2], in[1], in[3], 1e-3));
    return ops::Add(grads.dx, grads.dweight);
  };
  cases.push_back(
      {"add_rms_norm_backward",
       "with weight and grad_sum",
       {Random64({2, 3, 4}, -2, 2, rng), Random64({2, 3, 4}, -1, 1, rng),
        Random64({4}, 0.5, 2, rng), Random64({2, 3, 4}, -1, 1, rng)},
       add_rms_backward});
  for (bool with_bias : {false, true}) {
    const auto layer_backward =
        [with_bias](const In& in) -> absl::StatusOr<DTensor> {
      // Only the presence of the bias matters: x stands for it.
      DT_ASSIGN_OR_RETURN(
          ops::NormGradients grads,
          ops::LayerNormBackward(in[0], in[2], with_bias ? in[0] : DTensor(),
                                 in[1], 1e-3));
      DTensor out = grads.dx;
      if (grads.dweight.defined()) {
        DT_ASSIGN_OR_RETURN(out, ops::Add(out, grads.dweight));
      }
      if (grads.dbias.defined()) {
        DT_ASSIGN_OR_RETURN(DTensor scaled, ops::Mul(grads.dbias, 0.5));
        DT_ASSIGN_OR_RETURN(out, ops::Add(out, scaled));
      }
      return out;
    };
    cases.push_back(
        {"layer_norm_backward",
         with_bias ? "weight and bias" : "weight",
         {Random64({2, 3, 4}, -2, 2, rng), Random64({2, 3, 4}, -1, 1, rng),
          Random64({4}, 0.5, 2, rng)},
         layer_backward});
    cases.push_back(
        {"layer_norm_backward",
         with_bias ? "bias only" : "no parameters",
         {Random64({3, 5}, -2, 2, rng), Random64({3, 5}, -1, 1, rng), Tensor()},
         layer_backward});
  }
  return cases;
}

std::vector<GradCase> VocabCases() {
  std::mt19937 rng(29);
  std::vector<GradCase> cases;
  const auto embedding = [](const In& in) {
    return ops::Embedding(in[0], in[1]);
  };
  // Repeated indices add their rows' gradients.
  cases.push_back({"embedding",
                   "i64 indices [2, 3], repeats",
                   {*Tensor::FromVector<int64_t>({1, 4, 1, 0, 4, 4}, {2, 3}),
                    Random64({5, 3}, -1, 1, rng)},
                   embedding});
  cases.push_back(
      {"embedding",
       "i32 indices [4]",
       {RandomIndices({4}, 6, DType::kI32, rng), Random64({6, 2}, -1, 1, rng)},
       embedding});
  cases.push_back(
      {"embedding",
       "0-d index",
       {*Tensor::FromVector<int64_t>({2}, {}), Random64({3, 2}, -1, 1, rng)},
       embedding});
  // Its own gradient (double differentiation) looks the rows up again.
  cases.push_back(
      {"embedding_backward",
       "i64 indices [2, 3], repeats, table [5, 2]",
       {*Tensor::FromVector<int64_t>({1, 4, 1, 0, 4, 4}, {2, 3}),
        Random64({2, 3, 2}, -1, 1, rng), Random64({5, 2}, -1, 1, rng)},
       [](const In& in) {
         return ops::EmbeddingBackward(in[0], in[1], in[2]);
       }});
  const Tensor targets =
      *Tensor::FromVector<int64_t>({2, -100, 0, 3, 3, -100}, {6});
  for (Reduction reduction :
       {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    cases.push_back({"cross_entropy",
                     "[6, 4] with ignored targets, reduction " +
                         std::to_string(static_cast<int>(reduction)),
                     {Random64({6, 4}, -2, 2, rng), targets},
                     [reduction](const In& in) {
                       return ops::CrossEntropy(in[0], in[1], reduction);
                     }});
  }
  // The fused backward as a function of logits, log-sum-exp and grad (any
  // log-sum-exp: the op takes it as an input), 3-D logits.
  const Tensor targets_3d =
      *Tensor::FromVector<int64_t>({2, -100, 0, 3, 3, -100}, {2, 3});
  for (Reduction reduction :
       {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    const bool per_row = reduction == Reduction::kNone;
    cases.push_back(
        {"cross_entropy_backward",
         "[2, 3, 4] with ignored targets, reduction " +
             std::to_string(static_cast<int>(reduction)),
         {Random64({2, 3, 4}, -2, 2, rng), targets_3d,
          Random64({2, 3}, 1, 2, rng),
          Random64(per_row ? Shape{2, 3} : Shape{}, -1, 1, rng),
          reduction == Reduction::kMean ? Tensor::Scalar(5, DType::kI64)
                                        : Tensor()},
         [reduction](const In& in) {
           return ops::CrossEntropyBackward(in[0], in[1], in[2], in[3], in[4],
                                            reduction);
         }});
  }
  cases.push_back(
      {"cross_entropy",
       "[5] logits, 0-d i32 target",
       {Random64({5}, -2, 2, rng), *Tensor::FromVector<int32_t>({3}, {})},
       [](const In& in) { return ops::CrossEntropy(in[0], in[1]); }});
  return cases;
}

TEST(NnGradTest, EveryOpIsCovered) {
  std::vector<std::string> missing =
      testing_util::Uncovered(ops::NnOps(), NnCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
  missing = testing_util::Uncovered(ops::NormOps(), NnCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
  missing = testing_util::Uncovered(ops::AddNormOps(), NnCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
  missing = testing_util::Uncovered(ops::AttentionOps(), NnCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
  missing = testing_util::Uncovered(ops::EmbeddingOps(), VocabCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
  missing = testing_util::Uncovered(ops::VocabOps(), VocabCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
}

// A training step's attention gradient makes no [seq, seq] tensor: causal
// attention over 16384 positions (one head of dim 8) on a metadata-only
// mesh, every op of the forward and of the backward counted. One [seq, seq]
// f32 score matrix would be 1 GiB.
TEST(NnGradTest, AttentionGradientMakesNoScoreMatrix) {
  constexpr int64_t kSeq = 16384;
  const absl::Status status = [&]() -> absl::Status {
    auto runtime = Runtime::MetadataOnly(0);
    DT_ASSIGN_OR_RETURN(const DeviceMesh mesh, DeviceMesh::Create({2}));
    std::vector<DTensor> qkv;
    for (int i = 0; i < 3; ++i) {
      DT_ASSIGN_OR_RETURN(DTensor t, testing_util::MetaTensor(
                                         runtime, mesh, {2, kSeq, 8}, "S(0)"));
      qkv.push_back(std::move(t));
    }
    OpCounter ops;
    OpCounter::Scope counting(ops);
    nn::GradientTape tape;
    DTensor loss;
    {
      nn::GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(DTensor out, ops::ScaledDotProductAttention(
                                           qkv[0], qkv[1], qkv[2], true));
      DT_ASSIGN_OR_RETURN(loss, ops::Sum(out));
    }
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, tape.Gradient(loss, qkv));
    EXPECT_EQ(ops.count("scaled_dot_product_attention_backward"), 1);
    EXPECT_LT(ops.peak_local_bytes(), int64_t{kSeq} * kSeq * 4 / 64);
    for (const OpCounter::Event& event : ops.events()) {
      for (const auto& spec : event.outputs) {
        const Shape& shape = spec->shape();
        EXPECT_FALSE(shape.size() >= 2 && shape[shape.size() - 1] == kSeq &&
                     shape[shape.size() - 2] == kSeq)
            << event.op << " made " << ShapeToString(shape);
      }
    }
    return absl::OkStatus();
  }();
  EXPECT_TRUE(status.ok()) << status;
}

TEST(NnGradTest, NnOpGradients) {
  const absl::Status status = CheckGradCases(NnCases(), 71, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(NnGradTest, VocabOpGradients) {
  const absl::Status status = CheckGradCases(VocabCases(), 81, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
