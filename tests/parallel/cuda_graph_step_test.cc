// LlamaTrainer::CaptureStep / ReplayStep's errors that need no device: a CPU
// trainer (which goes on training eagerly), a two-rank mesh, a replay before
// any capture. The replays' results are checked on a GPU by
// cuda_graph_step_gpu_test.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "tools/explain_config.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 8;

absl::StatusOr<LlamaTrainer::Batch> MakeBatch(const LlamaTrainer& trainer,
                                              int64_t vocab) {
  std::vector<int64_t> tokens, targets;
  for (int64_t i = 0; i < kBatch * kSeq; ++i) {
    tokens.push_back((i * 5) % vocab);
    targets.push_back((i * 5 + 1) % vocab);
  }
  DT_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(tokens, {kBatch, kSeq}));
  DT_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(targets, {kBatch, kSeq}));
  return trainer.MakeBatch(t, y);
}

// Runs `body` on every rank of a `ranks`-rank CPU cluster with a tiny-Llama
// trainer on a 1-D mesh of those ranks.
absl::Status WithCpuTrainer(
    int64_t ranks,
    const std::function<absl::Status(LlamaTrainer&, int64_t vocab)>& body) {
  DT_ASSIGN_OR_RETURN(nn::LlamaConfig config, LoadLlamaConfig("tiny"));
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({ranks}));
  LocalCluster cluster(ranks);
  return cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    LlamaTrainerOptions options;
    options.config = config;
    DT_ASSIGN_OR_RETURN(
        std::unique_ptr<LlamaTrainer> trainer,
        LlamaTrainer::Create(Runtime::ForRank(groups), mesh, Plan(), options));
    return body(*trainer, config.vocab_size);
  });
}

void ExpectFailedPrecondition(const absl::Status& status,
                              const std::string& part) {
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find(part), std::string::npos) << status;
}

TEST(CudaGraphStepTest, CpuTrainerRefusesCaptureAndReplay) {
  const absl::Status status = WithCpuTrainer(
      1, [](LlamaTrainer& trainer, int64_t vocab) -> absl::Status {
        DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                            MakeBatch(trainer, vocab));
        ExpectFailedPrecondition(trainer.ReplayStep(batch).status(),
                                 "no step is captured");
        DT_RETURN_IF_ERROR(trainer.Step(batch).status());
        ExpectFailedPrecondition(trainer.CaptureStep(batch),
                                 "the trainer's device is cpu");
        EXPECT_FALSE(trainer.step_captured());
        EXPECT_EQ(trainer.steps_taken(), 1);
        // The trainer still trains eagerly.
        DT_RETURN_IF_ERROR(trainer.Step(batch).status());
        EXPECT_EQ(trainer.steps_taken(), 2);
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
}

TEST(CudaGraphStepTest, TwoRankMeshRefusesCapture) {
  const absl::Status status = WithCpuTrainer(
      2, [](LlamaTrainer& trainer, int64_t vocab) -> absl::Status {
        DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                            MakeBatch(trainer, vocab));
        ExpectFailedPrecondition(trainer.CaptureStep(batch),
                                 "the mesh has 2 ranks");
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
