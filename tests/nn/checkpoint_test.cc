// Activation checkpointing (dtensor/nn/checkpoint.h): gradients bit-identical
// to the same step without it (the tiny Llama, full and selective; a block
// with Dropout called twice), the tape keeping less and the step's peak of
// live tensor bytes lower, selective mode replaying the kept ops, errors.
#include "dtensor/nn/checkpoint.h"

#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/dropout.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/storage_peak.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace nn {
namespace {

using nn_testing::RunOnMesh;

enum class Checkpointing { kNone, kFull, kSelective };

// What one step observed on rank 0: the loss, each parameter's gradient
// (its bits), the records and the peak of live tensor bytes.
struct Step {
  std::vector<float> loss;
  std::vector<std::vector<float>> grads;
  int64_t peak_bytes = 0;
  size_t records = 0;
  CheckpointTally tally;
};

absl::Status Apply(Checkpointing mode, Module& block) {
  switch (mode) {
    case Checkpointing::kNone:
      return absl::OkStatus();
    case Checkpointing::kFull:
      return CheckpointModule(block, CheckpointPolicy::Full());
    case Checkpointing::kSelective:
      return CheckpointModule(block, CheckpointPolicy::Selective());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Values(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(Tensor full, x.FullTensor());
  return full.ToVector<float>();
}

// One training step of the tiny Llama with `n_layers` blocks on one rank,
// its blocks checkpointed by `mode`.
absl::StatusOr<Step> LlamaStep(Checkpointing mode, int64_t n_layers) {
  Step step;
  DT_RETURN_IF_ERROR(RunOnMesh(
      {1},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        LlamaConfig config = nn_testing::TinyConfig();
        config.n_layers = n_layers;
        DT_ASSIGN_OR_RETURN(auto model, BuildLlama(config, runtime, mesh));
        for (const Module::Child& block : model->layers().children()) {
          DT_RETURN_IF_ERROR(Apply(mode, *block.module));
        }
        std::mt19937 rng(3);
        const Tensor tokens = nn_testing::RandomTokens({2, 16}, 64, rng);
        const Tensor targets = nn_testing::RandomTokens({32}, 64, rng);
        DT_ASSIGN_OR_RETURN(DTensor x,
                            nn_testing::Replicated(runtime, mesh, tokens));
        DT_ASSIGN_OR_RETURN(DTensor y,
                            nn_testing::Replicated(runtime, mesh, targets));
        std::vector<DTensor> params;
        for (const NamedSlot& p : model->NamedParameters()) {
          params.push_back(p.slot->value);
        }
        ResetPeakLiveStorageBytes();
        const int64_t before = Storage::LiveBytes();
        GradientTape tape;
        DTensor loss;
        CheckpointTally::Scope tallying(step.tally);
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(x));
          DT_ASSIGN_OR_RETURN(logits, ops::View(logits, {32, 64}));
          DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(logits, y));
        }
        step.records = tape.num_records();
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                            tape.Gradient(loss, params));
        step.peak_bytes = PeakLiveStorageBytes() - before;
        DT_ASSIGN_OR_RETURN(step.loss, Values(loss));
        for (const DTensor& g : grads) {
          DT_ASSIGN_OR_RETURN(std::vector<float> v, Values(g));
          step.grads.push_back(std::move(v));
        }
        return absl::OkStatus();
      }));
  return step;
}

// Bitwise equality of two gradient lists.
void ExpectSameBits(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t p = 0; p < a.size(); ++p) {
    ASSERT_EQ(a[p].size(), b[p].size()) << "parameter " << p;
    EXPECT_EQ(std::memcmp(a[p].data(), b[p].data(), a[p].size() * 4), 0)
        << "parameter " << p << " differs";
  }
}

TEST(CheckpointTest, LlamaGradientsAreBitIdentical) {
  absl::StatusOr<Step> plain = LlamaStep(Checkpointing::kNone, 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (Checkpointing mode : {Checkpointing::kFull, Checkpointing::kSelective}) {
    absl::StatusOr<Step> checkpointed = LlamaStep(mode, 2);
    ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
    EXPECT_EQ(checkpointed->loss, plain->loss);
    ExpectSameBits(checkpointed->grads, plain->grads);
    // Each block is one record on the caller's tape.
    EXPECT_LT(checkpointed->records, plain->records);
    EXPECT_EQ(checkpointed->tally.regions, 2);
    EXPECT_GT(checkpointed->tally.recomputed_bytes, 0);
  }
}

TEST(CheckpointTest, SelectiveModeKeepsTheMatmulsAndRecomputesTheRest) {
  absl::StatusOr<Step> full = LlamaStep(Checkpointing::kFull, 2);
  absl::StatusOr<Step> selective = LlamaStep(Checkpointing::kSelective, 2);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(selective.ok()) << selective.status();
  EXPECT_EQ(full->tally.saved_bytes, 0);
  EXPECT_GT(selective->tally.saved_bytes, 0);
  // The kept outputs are no longer recomputed: fewer calls run again and
  // fewer bytes are dropped.
  EXPECT_LT(selective->tally.recomputed_calls, full->tally.recomputed_calls);
  EXPECT_LT(selective->tally.recomputed_bytes, full->tally.recomputed_bytes);
  EXPECT_GT(selective->tally.recomputed_calls, 0);
}

TEST(CheckpointTest, PeakOfLiveBytesIsLower) {
  absl::StatusOr<Step> plain = LlamaStep(Checkpointing::kNone, 8);
  absl::StatusOr<Step> full = LlamaStep(Checkpointing::kFull, 8);
  absl::StatusOr<Step> selective = LlamaStep(Checkpointing::kSelective, 8);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(selective.ok()) << selective.status();
  std::cout << "peak live bytes, 8 layers: none " << plain->peak_bytes
            << ", full " << full->peak_bytes << ", selective "
            << selective->peak_bytes << "\n";
  EXPECT_LT(full->peak_bytes, plain->peak_bytes);
  EXPECT_LT(selective->peak_bytes, plain->peak_bytes);
  EXPECT_LE(full->peak_bytes, selective->peak_bytes);
}

// y = tanh(dropout(linear(x))) * x: dropout draws from its stream.
class DropoutBlock : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<DropoutBlock>> Create() {
    std::unique_ptr<DropoutBlock> block(new DropoutBlock());
    DT_ASSIGN_OR_RETURN(auto linear, Linear::Create(8, 8));
    DT_ASSIGN_OR_RETURN(auto dropout, Dropout::Create(0.4, 11));
    DT_ASSIGN_OR_RETURN(block->linear_,
                        block->AddModule("linear", std::move(linear)));
    DT_ASSIGN_OR_RETURN(block->dropout_,
                        block->AddModule("dropout", std::move(dropout)));
    return block;
  }
  absl::string_view type_name() const override { return "DropoutBlock"; }
  Dropout& dropout() const { return *dropout_; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override {
    DT_ASSIGN_OR_RETURN(DTensor h, (*linear_)(x));
    DT_ASSIGN_OR_RETURN(h, (*dropout_)(h));
    DT_ASSIGN_OR_RETURN(h, ops::Tanh(h));
    return ops::Mul(h, x);
  }

 private:
  DropoutBlock() = default;
  Linear* linear_ = nullptr;
  Dropout* dropout_ = nullptr;
};

// The block applied twice (the second call draws further in the stream);
// the gradients of the weight and the input, and the offset afterwards.
absl::StatusOr<std::vector<std::vector<float>>> DropoutStep(bool checkpoint) {
  std::vector<std::vector<float>> result;
  DT_RETURN_IF_ERROR(RunOnMesh(
      {1},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto block, DropoutBlock::Create());
        DT_RETURN_IF_ERROR(Initialize(*block, runtime, mesh));
        if (checkpoint) {
          DT_RETURN_IF_ERROR(
              CheckpointModule(*block, CheckpointPolicy::Full()));
        }
        std::mt19937 rng(5);
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            nn_testing::Replicated(runtime, mesh,
                                   nn_testing::RandomF32({4, 8}, -1, 1, rng)));
        GradientTape tape;
        DTensor loss;
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(DTensor h, (*block)(x));
          DT_ASSIGN_OR_RETURN(h, (*block)(h));
          DT_ASSIGN_OR_RETURN(loss, ops::Sum(h));
        }
        DT_ASSIGN_OR_RETURN(Module * linear, block->Submodule("linear"));
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                            tape.Gradient(loss, {linear->slots()[0].value, x}));
        for (const DTensor& g : grads) {
          DT_ASSIGN_OR_RETURN(std::vector<float> v, Values(g));
          result.push_back(std::move(v));
        }
        result.push_back({static_cast<float>(block->dropout().offset())});
        return absl::OkStatus();
      }));
  return result;
}

TEST(CheckpointTest, DropoutRedrawsTheSameNumbers) {
  absl::StatusOr<std::vector<std::vector<float>>> plain = DropoutStep(false);
  absl::StatusOr<std::vector<std::vector<float>>> checkpointed =
      DropoutStep(true);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
  // Both gradients bit-identical, and the stream's offset where the two
  // forward calls left it (the recomputes put it back).
  ExpectSameBits(*checkpointed, *plain);
  EXPECT_EQ(plain->back()[0], 64.0f);
}

TEST(CheckpointTest, Errors) {
  EXPECT_FALSE(ParseCheckpointMode("partial").ok());
  EXPECT_EQ(*ParseCheckpointMode("selective"),
            CheckpointPolicy::Mode::kSelective);
  absl::StatusOr<std::unique_ptr<Linear>> linear = Linear::Create(2, 2);
  ASSERT_TRUE(linear.ok());
  EXPECT_EQ(CheckpointModule(**linear, CheckpointPolicy::Selective({})).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace nn
}  // namespace dtensor
