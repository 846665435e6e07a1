// LlamaTrainer's CUDA graph of the step on a GPU (tag `gpu`; skips without a
// device): the tiny Llama in f32 on one CUDA rank, trained from the same seed
// on the same batches by eager Steps and by one eager Step, CaptureStep and
// ReplaySteps, gives the same losses and final parameters (within a tight
// tolerance: the summation order of atomics may differ) and the same step
// counts; the replayed steps make no host sync; a bad token id in a replayed
// batch fails the loss read as a Step's does; the errors that need a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/parallel/tiny_llama_gpu.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int64_t kBatch = 4;
constexpr int64_t kSeq = 32;
constexpr int kReplays = 4;

absl::StatusOr<LlamaTrainer::Batch> StepBatch(const LlamaTrainer& trainer,
                                              int64_t vocab, int step) {
  DT_ASSIGN_OR_RETURN(auto data, TinyStepData(vocab, step, kBatch, kSeq));
  return trainer.MakeBatch(data.first, data.second);
}

// The loss of a step, read on the host (the step's one host sync).
absl::StatusOr<double> Read(const absl::StatusOr<DTensor>& loss) {
  DT_RETURN_IF_ERROR(loss.status());
  DT_ASSIGN_OR_RETURN(Tensor value, loss->FullTensor());
  return value.Item();
}

// Runs `body` on one CUDA rank with a maker of f32 tiny-Llama trainers (all
// from the same seed).
absl::Status WithTrainers(
    const std::function<absl::Status(const MakeTinyTrainer&, int64_t vocab)>&
        body) {
  LlamaTrainerOptions options;
  options.seed = 7;
  return WithTinyTrainers(options, body);
}

// The parameters' values, each gathered to the CPU.
absl::StatusOr<std::vector<std::vector<float>>> Parameters(
    const LlamaTrainer& trainer) {
  std::vector<std::vector<float>> values;
  for (const DTensor& p : trainer.parameters()) {
    DT_ASSIGN_OR_RETURN(Tensor full, p.FullTensor());
    DT_ASSIGN_OR_RETURN(std::vector<float> v, full.ToVector<float>());
    values.push_back(std::move(v));
  }
  return values;
}

TEST(CudaGraphStepGpuTest, ReplaysTrainAsEagerSteps) {
  DTENSOR_SKIP_WITHOUT_GPU();
  Profiler profiler(0);
  std::vector<double> eager_losses, graph_losses;
  std::vector<std::vector<float>> eager_params, graph_params, initial;
  std::vector<int64_t> eager_counts, graph_counts;
  int64_t eager_steps = 0, graph_steps = 0;
  const absl::Status status = WithTrainers(
      [&](const MakeTinyTrainer& make, int64_t vocab) -> absl::Status {
        {
          DT_ASSIGN_OR_RETURN(std::unique_ptr<LlamaTrainer> eager, make());
          DT_ASSIGN_OR_RETURN(initial, Parameters(*eager));
          for (int step = 0; step <= kReplays; ++step) {
            DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                                StepBatch(*eager, vocab, step));
            DT_ASSIGN_OR_RETURN(DTensor loss, eager->Step(batch));
            DT_ASSIGN_OR_RETURN(double value, Read(loss));
            eager_losses.push_back(value);
          }
          DT_ASSIGN_OR_RETURN(eager_params, Parameters(*eager));
          eager_counts = eager->optimizer().steps();
          eager_steps = eager->steps_taken();
        }
        DT_ASSIGN_OR_RETURN(std::unique_ptr<LlamaTrainer> graphed, make());
        DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch first,
                            StepBatch(*graphed, vocab, 0));
        DT_ASSIGN_OR_RETURN(DTensor loss, graphed->Step(first));
        DT_ASSIGN_OR_RETURN(double value, Read(loss));
        graph_losses.push_back(value);
        DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch example,
                            StepBatch(*graphed, vocab, 1));
        DT_RETURN_IF_ERROR(graphed->CaptureStep(example));
        EXPECT_EQ(graphed->steps_taken(), 1) << "the capture applies nothing";
        for (int step = 1; step <= kReplays; ++step) {
          {
            Profiler::Scope scope(profiler);
            Profiler::StepScope profiled(profiler);
            DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                                StepBatch(*graphed, vocab, step));
            DT_ASSIGN_OR_RETURN(loss, graphed->ReplayStep(batch));
          }
          DT_ASSIGN_OR_RETURN(value, Read(loss));
          graph_losses.push_back(value);
        }
        DT_ASSIGN_OR_RETURN(graph_params, Parameters(*graphed));
        graph_counts = graphed->optimizer().steps();
        graph_steps = graphed->steps_taken();
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(graph_losses.size(), eager_losses.size());
  for (size_t i = 0; i < eager_losses.size(); ++i) {
    EXPECT_NEAR(graph_losses[i], eager_losses[i], 1e-4 * eager_losses[i])
        << "step " << i;
    if (i > 0) {
      EXPECT_NE(eager_losses[i], eager_losses[i - 1]) << i;
    }
  }
  EXPECT_EQ(graph_steps, kReplays + 1);
  EXPECT_EQ(eager_steps, kReplays + 1);
  EXPECT_EQ(graph_counts, eager_counts);
  ASSERT_EQ(graph_params.size(), eager_params.size());
  double largest_move = 0;
  for (size_t p = 0; p < eager_params.size(); ++p) {
    ASSERT_EQ(graph_params[p].size(), eager_params[p].size());
    for (size_t i = 0; i < eager_params[p].size(); ++i) {
      // AdamW moves an element about lr = 1e-3 a step: a step missed or
      // applied twice differs by that much.
      ASSERT_NEAR(graph_params[p][i], eager_params[p][i], 1e-4)
          << "parameter " << p << " element " << i;
      largest_move = std::max<double>(
          largest_move, std::abs(eager_params[p][i] - initial[p][i]));
    }
  }
  EXPECT_GT(largest_move, 1e-3) << "training moved the parameters";
  ASSERT_EQ(profiler.steps().size(), static_cast<size_t>(kReplays));
  for (const Profiler::Step& step : profiler.steps()) {
    EXPECT_EQ(step.host_syncs, 0);
  }
}

// A bad token id in a replayed batch fails the loss read with the eager
// step's error, once; the next good replay reads fine. Other shapes and a
// capture before any step are refused.
TEST(CudaGraphStepGpuTest, ReplayErrors) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const absl::Status status = WithTrainers([&](const MakeTinyTrainer& make,
                                               int64_t vocab) -> absl::Status {
    DT_ASSIGN_OR_RETURN(std::unique_ptr<LlamaTrainer> trainer, make());
    DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                        StepBatch(*trainer, vocab, 0));
    const absl::Status early = trainer->CaptureStep(batch);
    EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(early.message().find("no step was taken"), std::string::npos)
        << early;
    DT_RETURN_IF_ERROR(Read(trainer->Step(batch)).status());
    DT_RETURN_IF_ERROR(trainer->CaptureStep(batch));
    EXPECT_EQ(trainer->CaptureStep(batch).code(),
              absl::StatusCode::kFailedPrecondition);
    DT_ASSIGN_OR_RETURN(auto shorter, TinyStepData(vocab, 1, kBatch, kSeq / 2));
    DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch other,
                        trainer->MakeBatch(shorter.first, shorter.second));
    const absl::Status shape = trainer->ReplayStep(other).status();
    EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(shape.message().find("[4, 16]"), std::string::npos) << shape;
    DT_ASSIGN_OR_RETURN(auto data, TinyStepData(vocab, 2, kBatch, kSeq));
    Tensor bad = data.first.Clone();
    bad.data<int64_t>()[3] = vocab + 743;
    DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch bad_batch,
                        trainer->MakeBatch(bad, data.second));
    absl::StatusOr<double> read = Read(trainer->ReplayStep(bad_batch));
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(read.status().message(),
              absl::StrCat("Embedding: index ", vocab + 743,
                           " is out of range [0, ", vocab, ")"));
    DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch good,
                        trainer->MakeBatch(data.first, data.second));
    read = Read(trainer->ReplayStep(good));
    EXPECT_TRUE(read.ok()) << read.status();
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
