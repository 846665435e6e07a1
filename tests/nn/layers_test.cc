// Each layer's forward against the reference in double
// (tests/nn/reference_llama.h) on random inputs and weights; Dropout's train
// and eval modes and fresh draws per call; attention with its projections
// laid out tensor-parallel on 2 ranks gives the one-rank result.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/attention.h"
#include "dtensor/nn/dropout.h"
#include "dtensor/nn/embedding.h"
#include "dtensor/nn/feed_forward.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/norms.h"
#include "dtensor/ops/random_ops.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"
#include "tests/nn/reference_llama.h"

namespace dtensor {
namespace {

using nn::Initializer;
using nn_testing::Array;
using nn_testing::Close;
using nn_testing::RunOnMesh;

const Initializer kWide = Initializer::Normal(0.0, 0.3);

// Initializes `module` on this rank's mesh with `seed`, sets every slot with
// a constant initializer to random values (so norms are not all ones), and
// returns the weights.
absl::StatusOr<nn_testing::Weights> InitializeRandomly(
    nn::Module& module, std::shared_ptr<Runtime> runtime,
    const DeviceMesh& mesh, uint64_t seed) {
  nn::InitOptions options;
  options.seed = seed;
  DT_RETURN_IF_ERROR(nn::Initialize(module, runtime, mesh, options));
  std::mt19937 rng(seed);
  for (const nn::NamedSlot& named : module.NamedSlots()) {
    if (named.slot->init.kind != Initializer::Kind::kConstant) continue;
    DT_ASSIGN_OR_RETURN(
        DTensor value,
        nn_testing::Replicated(
            runtime, mesh,
            nn_testing::RandomF32(named.slot->shape, 0.5, 1.5, rng)));
    DT_RETURN_IF_ERROR(module.SetSlot(named.name, value));
  }
  return nn_testing::GatherWeights(module);
}

// Runs `body` on one rank.
absl::Status OnOneRank(const nn_testing::RankFn& body) {
  return RunOnMesh({1}, body);
}

TEST(LayersTest, LinearMatchesReference) {
  for (const bool bias : {false, true}) {
    const absl::Status status =
        OnOneRank([&](std::shared_ptr<Runtime> runtime,
                      const DeviceMesh& mesh) -> absl::Status {
          nn::LinearOptions options;
          options.bias = bias;
          options.weight_init = kWide;
          options.bias_init = Initializer::Uniform(-1, 1);
          DT_ASSIGN_OR_RETURN(auto linear, nn::Linear::Create(5, 7, options));
          DT_ASSIGN_OR_RETURN(auto weights,
                              InitializeRandomly(*linear, runtime, mesh, 1));
          std::mt19937 rng(4);
          const Tensor x = nn_testing::RandomF32({2, 3, 5}, -1, 1, rng);
          DT_ASSIGN_OR_RETURN(DTensor input,
                              nn_testing::Replicated(runtime, mesh, x));
          DT_ASSIGN_OR_RETURN(DTensor y, (*linear)(input));
          EXPECT_EQ(y.shape(), (Shape{2, 3, 7}));
          const std::vector<double> expected = nn_testing::RefLinear(
              x.ToVector<double>().value(), 6, weights.at("weight"),
              bias ? &weights.at("bias") : nullptr);
          EXPECT_TRUE(Close(y.ToLocal().ToVector<double>().value(), expected,
                            1e-5, 1e-6))
              << "bias " << bias;
          EXPECT_EQ(linear->has_bias(), bias);
          EXPECT_EQ(linear->bias().defined(), bias);
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(LayersTest, EmbeddingLooksUpRows) {
  const absl::Status status =
      OnOneRank([&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto embedding, nn::Embedding::Create(10, 4));
        DT_ASSIGN_OR_RETURN(auto weights,
                            InitializeRandomly(*embedding, runtime, mesh, 2));
        std::mt19937 rng(5);
        const Tensor indices = nn_testing::RandomTokens({3, 2}, 10, rng);
        DT_ASSIGN_OR_RETURN(DTensor input,
                            nn_testing::Replicated(runtime, mesh, indices));
        DT_ASSIGN_OR_RETURN(DTensor y, (*embedding)(input));
        EXPECT_EQ(y.shape(), (Shape{3, 2, 4}));
        std::vector<double> expected;
        const Array& table = weights.at("weight");
        const std::vector<int64_t> host_values =
            indices.ToVector<int64_t>().value();
        for (int64_t index : host_values) {
          for (int64_t j = 0; j < 4; ++j) {
            expected.push_back(table.values[index * 4 + j]);
          }
        }
        EXPECT_EQ(y.ToLocal().ToVector<double>().value(), expected);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(LayersTest, NormsMatchReference) {
  const absl::Status status =
      OnOneRank([&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
        std::mt19937 rng(6);
        const Tensor x = nn_testing::RandomF32({3, 2, 8}, -2, 3, rng);
        DT_ASSIGN_OR_RETURN(DTensor input,
                            nn_testing::Replicated(runtime, mesh, x));
        const std::vector<double> xs = x.ToVector<double>().value();

        DT_ASSIGN_OR_RETURN(auto rms, nn::RMSNorm::Create(8, 1e-3));
        DT_ASSIGN_OR_RETURN(auto rms_weights,
                            InitializeRandomly(*rms, runtime, mesh, 3));
        DT_ASSIGN_OR_RETURN(DTensor y, (*rms)(input));
        EXPECT_TRUE(
            Close(y.ToLocal().ToVector<double>().value(),
                  nn_testing::RefRmsNorm(xs, rms_weights.at("weight"), 1e-3),
                  1e-5, 1e-6));

        for (const bool affine : {false, true}) {
          for (const bool bias : {false, true}) {
            DT_ASSIGN_OR_RETURN(auto ln,
                                nn::LayerNorm::Create(8, 1e-2, affine, bias));
            DT_ASSIGN_OR_RETURN(auto w,
                                InitializeRandomly(*ln, runtime, mesh, 4));
            EXPECT_EQ(static_cast<int>(ln->NamedParameters().size()),
                      affine ? (bias ? 2 : 1) : 0);
            DT_ASSIGN_OR_RETURN(y, (*ln)(input));
            const Array* weight = affine ? &w.at("weight") : nullptr;
            const Array* b = affine && bias ? &w.at("bias") : nullptr;
            EXPECT_TRUE(Close(y.ToLocal().ToVector<double>().value(),
                              nn_testing::RefLayerNorm(xs, 8, weight, b, 1e-2),
                              1e-5, 1e-5))
                << "affine " << affine << " bias " << bias;
          }
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// RMSNorm::ForwardWithResidual: fused without hooks, and with a hook (which
// must then run once, on the sum) as the add then the call; both against
// the reference of add-then-RMSNorm.
TEST(LayersTest, RmsNormWithResidualMatchesReference) {
  const absl::Status status =
      OnOneRank([&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
        std::mt19937 rng(16);
        const Tensor x = nn_testing::RandomF32({3, 2, 8}, -2, 3, rng);
        const Tensor d = nn_testing::RandomF32({3, 2, 8}, -1, 1, rng);
        DT_ASSIGN_OR_RETURN(DTensor residual,
                            nn_testing::Replicated(runtime, mesh, x));
        DT_ASSIGN_OR_RETURN(DTensor delta,
                            nn_testing::Replicated(runtime, mesh, d));
        std::vector<double> sum = x.ToVector<double>().value();
        const std::vector<double> ds = d.ToVector<double>().value();
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += ds[i];
        DT_ASSIGN_OR_RETURN(auto rms, nn::RMSNorm::Create(8, 1e-3));
        DT_ASSIGN_OR_RETURN(auto weights,
                            InitializeRandomly(*rms, runtime, mesh, 17));
        const std::vector<double> normed =
            nn_testing::RefRmsNorm(sum, weights.at("weight"), 1e-3);
        std::vector<std::vector<double>> hooked;
        for (const bool with_hook : {false, true}) {
          if (with_hook) {
            rms->AddInputHook([&](const DTensor& in) {
              hooked.push_back(in.ToLocal().ToVector<double>().value());
              return in;
            });
          }
          DT_ASSIGN_OR_RETURN(const ops::AddNormOutputs out,
                              rms->ForwardWithResidual(residual, delta));
          EXPECT_TRUE(Close(out.sum.ToLocal().ToVector<double>().value(), sum,
                            1e-6, 1e-6))
              << "hook " << with_hook;
          EXPECT_TRUE(Close(out.normed.ToLocal().ToVector<double>().value(),
                            normed, 1e-5, 1e-6))
              << "hook " << with_hook;
        }
        EXPECT_EQ(hooked.size(), 1u);
        if (!hooked.empty()) {
          EXPECT_TRUE(Close(hooked[0], sum, 1e-6, 1e-6));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(LayersTest, FeedForwardMatchesReference) {
  const absl::Status status =
      OnOneRank([&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto ffn, nn::FeedForward::Create(6, 10, kWide));
        DT_ASSIGN_OR_RETURN(auto weights,
                            InitializeRandomly(*ffn, runtime, mesh, 5));
        std::mt19937 rng(7);
        const Tensor x = nn_testing::RandomF32({2, 3, 6}, -1, 1, rng);
        DT_ASSIGN_OR_RETURN(DTensor input,
                            nn_testing::Replicated(runtime, mesh, x));
        DT_ASSIGN_OR_RETURN(DTensor y, (*ffn)(input));
        EXPECT_TRUE(Close(y.ToLocal().ToVector<double>().value(),
                          nn_testing::RefFeedForward(
                              x.ToVector<double>().value(), 6, weights, ""),
                          1e-5, 1e-6));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

struct AttentionCase {
  int64_t dim, n_heads, n_kv_heads, batch, seq;
};

TEST(LayersTest, AttentionMatchesReference) {
  const std::vector<AttentionCase> cases = {
      {16, 4, 1, 2, 5}, {16, 4, 2, 1, 7}, {16, 4, 4, 2, 3},
      {24, 6, 3, 2, 6}, {8, 1, 1, 3, 4},  {16, 2, 2, 1, 1},
  };
  for (const AttentionCase& c : cases) {
    const absl::Status status = OnOneRank([&](std::shared_ptr<Runtime> runtime,
                                              const DeviceMesh& mesh)
                                              -> absl::Status {
      DT_ASSIGN_OR_RETURN(
          auto attention,
          nn::Attention::Create(c.dim, c.n_heads, c.n_kv_heads, 500.0, kWide));
      DT_ASSIGN_OR_RETURN(auto weights,
                          InitializeRandomly(*attention, runtime, mesh, c.seq));
      std::mt19937 rng(8);
      const Tensor x =
          nn_testing::RandomF32({c.batch, c.seq, c.dim}, -1, 1, rng);
      DT_ASSIGN_OR_RETURN(DTensor input,
                          nn_testing::Replicated(runtime, mesh, x));
      DT_ASSIGN_OR_RETURN(DTensor y, (*attention)(input));
      EXPECT_EQ(y.shape(), x.shape());
      EXPECT_TRUE(Close(
          y.ToLocal().ToVector<double>().value(),
          nn_testing::RefAttention(x.ToVector<double>().value(), c.batch, c.seq,
                                   weights, "", c.n_heads, c.n_kv_heads, 500.0),
          1e-4, 1e-5))
          << "dim " << c.dim << " heads " << c.n_heads << "/" << c.n_kv_heads;
      return absl::OkStatus();
    });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(LayersTest, AttentionRejectsBadInputs) {
  const absl::Status status =
      OnOneRank([&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto attention,
                            nn::Attention::Create(16, 4, 2, 1e4));
        DT_RETURN_IF_ERROR(nn::Initialize(*attention, runtime, mesh));
        std::mt19937 rng(1);
        for (const Shape& shape : {Shape{2, 16}, Shape{1, 2, 8}}) {
          DT_ASSIGN_OR_RETURN(
              DTensor x,
              nn_testing::Replicated(runtime, mesh,
                                     nn_testing::RandomF32(shape, -1, 1, rng)));
          const absl::StatusOr<DTensor> y = (*attention)(x);
          EXPECT_FALSE(y.ok());
          EXPECT_NE(y.status().message().find(ShapeToString(shape)),
                    std::string::npos)
              << y.status();
        }
        EXPECT_FALSE((*attention)(DTensor()).ok());
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// Tensor-parallel projections (wq, wk, wv by rows, wo by columns) on 2 ranks
// give the replicated result.
TEST(LayersTest, TensorParallelAttentionEqualsReplicated) {
  const AttentionCase c{16, 4, 2, 2, 6};
  std::mt19937 rng(12);
  const Tensor x = nn_testing::RandomF32({c.batch, c.seq, c.dim}, -1, 1, rng);
  Tensor expected;
  const auto build = [&](std::shared_ptr<Runtime> runtime,
                         const DeviceMesh& mesh, const nn::InitOptions& options)
      -> absl::StatusOr<std::unique_ptr<nn::Attention>> {
    DT_ASSIGN_OR_RETURN(
        auto attention,
        nn::Attention::Create(c.dim, c.n_heads, c.n_kv_heads, 1e4, kWide));
    DT_RETURN_IF_ERROR(nn::Initialize(*attention, runtime, mesh, options));
    return attention;
  };
  absl::Status status = OnOneRank([&](std::shared_ptr<Runtime> runtime,
                                      const DeviceMesh& mesh) -> absl::Status {
    DT_ASSIGN_OR_RETURN(auto attention, build(runtime, mesh, {}));
    DT_ASSIGN_OR_RETURN(DTensor input,
                        nn_testing::Replicated(runtime, mesh, x));
    DT_ASSIGN_OR_RETURN(DTensor y, (*attention)(input));
    expected = y.ToLocal();
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  nn::InitOptions tensor_parallel;
  tensor_parallel.sharding = [](absl::string_view fqn, const Shape&) {
    return Sharding::Parse(fqn == "wo.weight" ? "S(1)" : "S(0)", 2);
  };
  status =
      RunOnMesh({2},
                [&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
                  DT_ASSIGN_OR_RETURN(auto attention,
                                      build(runtime, mesh, tensor_parallel));
                  DT_ASSIGN_OR_RETURN(DTensor input,
                                      nn_testing::Replicated(runtime, mesh, x));
                  DT_ASSIGN_OR_RETURN(DTensor y, (*attention)(input));
                  DT_ASSIGN_OR_RETURN(Tensor full, y.FullTensor());
                  EXPECT_TRUE(AllClose(full, expected, 1e-5, 1e-6)) << y.spec();
                  return absl::OkStatus();
                });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(LayersTest, DropoutDrawsFreshMasksInTrainingOnly) {
  const absl::Status status =
      OnOneRank([&](std::shared_ptr<Runtime> runtime,
                    const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto dropout, nn::Dropout::Create(0.25, 77));
        std::mt19937 rng(9);
        const Tensor x = nn_testing::RandomF32({4, 6}, 1, 2, rng);
        DT_ASSIGN_OR_RETURN(DTensor input,
                            nn_testing::Replicated(runtime, mesh, x));
        DT_ASSIGN_OR_RETURN(DTensor first, (*dropout)(input));
        EXPECT_EQ(dropout->offset(), 24u);
        DT_ASSIGN_OR_RETURN(DTensor second, (*dropout)(input));
        EXPECT_EQ(dropout->offset(), 48u);
        // Call k uses draws [24k, 24k + 24) of the stream of the seed.
        DT_ASSIGN_OR_RETURN(DTensor at0, ops::Dropout(input, 0.25, 77, 0));
        DT_ASSIGN_OR_RETURN(DTensor at24, ops::Dropout(input, 0.25, 77, 24));
        EXPECT_TRUE(AllClose(first.ToLocal(), at0.ToLocal(), 0, 0));
        EXPECT_TRUE(AllClose(second.ToLocal(), at24.ToLocal(), 0, 0));
        EXPECT_FALSE(AllClose(first.ToLocal(), second.ToLocal(), 0, 0));
        // Kept elements are scaled by 1 / (1 - p).
        const std::vector<double> xs = x.ToVector<double>().value();
        const std::vector<double> ys =
            first.ToLocal().ToVector<double>().value();
        int dropped = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
          if (ys[i] == 0) {
            ++dropped;
          } else {
            EXPECT_NEAR(ys[i], xs[i] / 0.75, 1e-5);
          }
        }
        EXPECT_GT(dropped, 0);
        EXPECT_LT(dropped, 24);
        dropout->SetTraining(false);
        DT_ASSIGN_OR_RETURN(DTensor eval, (*dropout)(input));
        EXPECT_TRUE(AllClose(eval.ToLocal(), x, 0, 0));
        EXPECT_EQ(dropout->offset(), 48u);
        DT_ASSIGN_OR_RETURN(auto none, nn::Dropout::Create(0, 1));
        DT_ASSIGN_OR_RETURN(DTensor kept, (*none)(input));
        EXPECT_TRUE(AllClose(kept.ToLocal(), x, 0, 0));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
