// The Llama-style Transformer's forward: on one rank against a reference in
// double written from the Llama reference (tests/nn/reference_llama.h); on 2
// and 4 in-process ranks with replicated and with randomly sharded
// parameters against the one-rank result; and a metadata-only forward of a
// 70B config on a (64, 8) mesh.
#include "dtensor/nn/llama.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/ops/op_counter.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"
#include "tests/nn/reference_llama.h"

namespace dtensor {
namespace {

using nn::BuildLlama;
using nn::InitOptions;
using nn::LlamaConfig;
using nn::Transformer;
using nn_testing::RunOnMesh;

constexpr uint64_t kSeed = 5;
constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 8;

InitOptions Seeded(uint64_t seed) {
  InitOptions options;
  options.seed = seed;
  return options;
}

Tensor Tokens(const LlamaConfig& config) {
  std::mt19937 rng(11);
  return nn_testing::RandomTokens({kBatch, kSeq}, config.vocab_size, rng);
}

// The logits of the tiny model on one rank.
absl::StatusOr<Tensor> OneRankLogits(const LlamaConfig& config) {
  Tensor logits;
  DT_RETURN_IF_ERROR(RunOnMesh(
      {1},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto model,
                            BuildLlama(config, runtime, mesh, Seeded(kSeed)));
        DT_ASSIGN_OR_RETURN(DTensor tokens, nn_testing::Replicated(
                                                runtime, mesh, Tokens(config)));
        DT_ASSIGN_OR_RETURN(DTensor out, (*model)(tokens));
        DT_ASSIGN_OR_RETURN(logits, out.FullTensor());
        return absl::OkStatus();
      }));
  return logits;
}

TEST(LlamaTest, OneRankForwardMatchesReference) {
  for (const int64_t kv_heads : {1, 2, 4}) {
    LlamaConfig config = nn_testing::TinyConfig();
    config.n_kv_heads = kv_heads;
    const Tensor tokens = Tokens(config);
    const absl::Status status = RunOnMesh(
        {1},
        [&](std::shared_ptr<Runtime> runtime,
            const DeviceMesh& mesh) -> absl::Status {
          DT_ASSIGN_OR_RETURN(auto model,
                              BuildLlama(config, runtime, mesh, Seeded(kSeed)));
          DT_ASSIGN_OR_RETURN(DTensor input,
                              nn_testing::Replicated(runtime, mesh, tokens));
          DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(input));
          EXPECT_EQ(logits.shape(), (Shape{kBatch, kSeq, config.vocab_size}));
          DT_ASSIGN_OR_RETURN(nn_testing::Weights weights,
                              nn_testing::GatherWeights(*model));
          const std::vector<double> expected =
              nn_testing::RefLlama(tokens.ToVector<int64_t>().value(), kBatch,
                                   kSeq, weights, config);
          DT_ASSIGN_OR_RETURN(Tensor got, logits.FullTensor());
          EXPECT_TRUE(nn_testing::Close(got.ToVector<double>().value(),
                                        expected, 1e-4, 1e-5))
              << "n_kv_heads " << kv_heads;
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(LlamaTest, ReplicatedForwardOnSeveralRanksEqualsOneRank) {
  const LlamaConfig config = nn_testing::TinyConfig();
  absl::StatusOr<Tensor> expected = OneRankLogits(config);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (const std::vector<int64_t>& mesh_shape :
       {std::vector<int64_t>{2}, std::vector<int64_t>{4},
        std::vector<int64_t>{2, 2}}) {
    const absl::Status status = RunOnMesh(
        mesh_shape,
        [&](std::shared_ptr<Runtime> runtime,
            const DeviceMesh& mesh) -> absl::Status {
          DT_ASSIGN_OR_RETURN(auto model,
                              BuildLlama(config, runtime, mesh, Seeded(kSeed)));
          DT_ASSIGN_OR_RETURN(
              DTensor tokens,
              nn_testing::Replicated(runtime, mesh, Tokens(config)));
          DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(tokens));
          for (const Placement& p : logits.placements()) {
            EXPECT_TRUE(p.is_replicate()) << logits.spec();
          }
          // Replicate: the local tensor is the whole result.
          EXPECT_TRUE(AllClose(logits.ToLocal(), *expected, 1e-6, 1e-7))
              << "mesh " << mesh.ToString() << " rank " << runtime->rank();
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

// A random layout per parameter on a 2-D mesh: each mesh dim Replicate or
// Shard of a random dim (nested when both pick the same dim).
std::map<std::string, Sharding> RandomShardings(const LlamaConfig& config,
                                                std::mt19937& rng) {
  std::unique_ptr<Transformer> model = *Transformer::Create(config);
  std::map<std::string, Sharding> shardings;
  for (const nn::NamedSlot& named : model->NamedSlots()) {
    const int64_t rank = static_cast<int64_t>(named.slot->shape.size());
    std::vector<Placement> placements;
    for (int m = 0; m < 2; ++m) {
      placements.push_back(rng() % 3 == 0 ? Placement::Replicate()
                                          : Placement::Shard(rng() % rank));
    }
    shardings[named.name] = *Sharding::FromPlacements(placements, rank);
  }
  return shardings;
}

TEST(LlamaTest, ShardedParametersGiveTheOneRankForward) {
  const LlamaConfig config = nn_testing::TinyConfig();
  absl::StatusOr<Tensor> expected = OneRankLogits(config);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const std::vector<std::vector<Placement>> all_token_placements = {
      {Placement::Shard(0), Placement::Replicate()},
      {Placement::Replicate(), Placement::Shard(1)},
      {Placement::Shard(1), Placement::Shard(0)},
  };
  std::mt19937 rng(3);
  for (const std::vector<Placement>& token_placements : all_token_placements) {
    const std::map<std::string, Sharding> shardings =
        RandomShardings(config, rng);
    InitOptions options = Seeded(kSeed);
    options.sharding = [&](absl::string_view fqn,
                           const Shape&) -> absl::StatusOr<Sharding> {
      return shardings.at(std::string(fqn));
    };
    const absl::Status status = RunOnMesh(
        {2, 2},
        [&](std::shared_ptr<Runtime> runtime,
            const DeviceMesh& mesh) -> absl::Status {
          DT_ASSIGN_OR_RETURN(auto model,
                              BuildLlama(config, runtime, mesh, options));
          DT_ASSIGN_OR_RETURN(DTensor tokens,
                              DTensor::Distribute(runtime, Tokens(config), mesh,
                                                  token_placements));
          DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(tokens));
          DT_ASSIGN_OR_RETURN(Tensor full, logits.FullTensor());
          EXPECT_TRUE(AllClose(full, *expected, 1e-4, 1e-5))
              << "tokens " << token_placements[0] << "," << token_placements[1]
              << "; logits " << logits.spec();
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(LlamaTest, BadTokensAreErrors) {
  const LlamaConfig config = nn_testing::TinyConfig();
  const absl::Status status = RunOnMesh(
      {1},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto model, BuildLlama(config, runtime, mesh));
        std::mt19937 rng(1);
        DT_ASSIGN_OR_RETURN(
            DTensor floats,
            nn_testing::Replicated(runtime, mesh,
                                   nn_testing::RandomF32({2, 4}, 0, 1, rng)));
        absl::StatusOr<DTensor> out = (*model)(floats);
        EXPECT_FALSE(out.ok());
        EXPECT_NE(out.status().message().find("integer"), std::string::npos)
            << out.status();
        DT_ASSIGN_OR_RETURN(
            DTensor too_long,
            nn_testing::Replicated(
                runtime, mesh,
                nn_testing::RandomTokens({1, config.max_seq_len + 1},
                                         config.vocab_size, rng)));
        out = (*model)(too_long);
        EXPECT_FALSE(out.ok());
        EXPECT_NE(out.status().message().find("max_seq_len 16"),
                  std::string::npos)
            << out.status();
        DT_ASSIGN_OR_RETURN(
            DTensor out_of_vocab,
            nn_testing::Replicated(runtime, mesh,
                                   *Tensor::Full({1, 2}, 64, DType::kI64)));
        EXPECT_FALSE((*model)(out_of_vocab).ok());
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// Llama 3 70B in bf16 on a (64, 8) mesh, parameters Replicate and tokens
// sharded over the first mesh dim: every parameter and activation without
// data, the whole forward a data-parallel one (no collective), each rank's
// logits one sequence.
TEST(LlamaTest, MetadataOnlyForwardOf70BOnA64x8Mesh) {
  const LlamaConfig config = LlamaConfig::Llama3_70B();
  auto runtime = Runtime::MetadataOnly(/*rank=*/100);
  const DeviceMesh mesh = *DeviceMesh::Create({64, 8}, {"dp", "tp"});
  InitOptions options;
  options.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<Transformer>> model =
      BuildLlama(config, runtime, mesh, options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->NumParameters(), 70553706496);
  for (const nn::NamedSlot& named : (*model)->NamedParameters()) {
    ASSERT_TRUE(named.slot->value.defined()) << named.name;
    EXPECT_FALSE(named.slot->value.ToLocal().defined()) << named.name;
    EXPECT_EQ(named.slot->value.sharding().ToString(), "R,R") << named.name;
  }
  const int64_t batch = 64;
  const int64_t seq = 2048;
  const DTensor tokens = *DTensor::FromSpec(
      runtime,
      *DTensorSpec::Create(mesh, {Placement::Shard(0), Placement::Replicate()},
                           {batch, seq}, DType::kI64));
  CommCounter comms;
  OpCounter op_counter;
  absl::StatusOr<DTensor> logits;
  {
    CommCounter::Scope comm_scope(comms);
    OpCounter::Scope op_scope(op_counter);
    logits = (**model)(tokens);
  }
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape(), (Shape{batch, seq, config.vocab_size}));
  EXPECT_EQ(logits->dtype(), DType::kBF16);
  EXPECT_EQ(logits->sharding().ToString(), "S(0),R");
  EXPECT_FALSE(logits->ToLocal().defined());
  EXPECT_EQ(comms.total_collectives(), 0);
  ASSERT_FALSE(op_counter.events().empty());
  // This rank's logits: one sequence of bf16.
  EXPECT_EQ(op_counter.events().back().local_bytes,
            seq * config.vocab_size * 2);
  // At least the 7 linears of every block ran.
  EXPECT_GE(op_counter.count("linear"), 7 * config.n_layers + 1);
}

}  // namespace
}  // namespace dtensor
