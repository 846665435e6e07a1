// `dtensor explain` with activation checkpointing: the tape keeps less, the
// recompute's collectives are backward's extra ones, the JSON gains its
// object; and the estimate against the peak of live tensor bytes a real step
// reaches on in-process ranks (the 8-layer tiny config, with and without).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/storage_peak.h"
#include "dtensor/testing/token_batch.h"
#include "gtest/gtest.h"
#include "tools/explain.h"
#include "tools/explain_config.h"
#include "tools/explain_format.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

// The 8-layer tiny config, batch 8 x seq 64 (train_llama's step), under
// `plan` (a shipped plan's name) on dp=2 x tp=2; `mode` "" is no
// checkpointing.
ExplainRequest Request(const std::string& plan, const std::string& mode) {
  const std::string path = absl::StrCat(
      std::getenv("TEST_SRCDIR"), "/dtensor/parallel/plans/", plan, ".json");
  ExplainRequest request{"tiny", path, *LoadLlamaConfig("tiny"),
                         *parallel::LoadPlanFile(path),
                         *ParseMeshFlag("dp=2,tp=2")};
  request.config.n_layers = 8;
  request.batch = 8;
  request.seq = 64;
  request.dtype = DType::kF32;
  if (!mode.empty()) request.plan.activation_checkpoint = {{"layers.*"}, mode};
  return request;
}

TEST(ExplainCheckpointTest, ModelsTheMemoryAndTheRecompute) {
  for (const std::string plan : {"tp_sp_fsdp", "tp_dp"}) {
    absl::StatusOr<ExplainReport> plain = ExplainLlamaStep(Request(plan, ""));
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_FALSE(plain->recompute.has_value());
    EXPECT_EQ(ExplainJson(*plain).find("activation_checkpoint"),
              std::string::npos);
    for (const std::string mode : {"full", "selective"}) {
      absl::StatusOr<ExplainReport> checkpointed =
          ExplainLlamaStep(Request(plan, mode));
      ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
      ASSERT_TRUE(checkpointed->recompute.has_value());
      const RecomputeReport& r = *checkpointed->recompute;
      EXPECT_EQ(r.regions, 8) << plan << " " << mode;
      EXPECT_GT(r.recomputed_activations, 0);
      EXPECT_GT(r.working_set, 0);
      EXPECT_GT(r.recomputed_calls, 0);
      EXPECT_EQ(r.saved_outputs > 0, mode == "selective");
      EXPECT_LT(checkpointed->memory.peak_activations,
                plain->memory.peak_activations)
          << plan << " " << mode;
      // Forward is the same. Backward adds the recompute's collectives, less
      // what backward no longer redoes on its own (the redistributions of
      // FSDP's gathered parameters that it rebuilds, now recomputed).
      EXPECT_EQ(checkpointed->forward.collectives, plain->forward.collectives);
      EXPECT_GT(r.collectives.collectives, 0);
      EXPECT_GE(checkpointed->backward.collectives, r.collectives.collectives);
      EXPECT_LE(checkpointed->backward.collectives - r.collectives.collectives,
                plain->backward.collectives)
          << plan << " " << mode;
      EXPECT_NE(ExplainJson(*checkpointed).find("\"activation_checkpoint\""),
                std::string::npos);
      EXPECT_NE(ExplainText(*checkpointed).find("Activation checkpointing"),
                std::string::npos);
    }
  }
}

// The highest Storage::LiveBytes of the second step (after the optimizer
// state exists) on in-process ranks, divided by the number of ranks.
absl::StatusOr<int64_t> MeasuredPeakPerRank(const ExplainRequest& request) {
  LocalCluster cluster(request.mesh.size());
  // The ranks' threads meet at each step's start: the peak is reset once
  // every rank has finished the first step.
  std::atomic<int64_t> finished_first{0};
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    parallel::LlamaTrainerOptions options;
    options.config = request.config;
    options.dtype = request.dtype;
    DT_ASSIGN_OR_RETURN(auto trainer, parallel::LlamaTrainer::Create(
                                          Runtime::ForRank(groups),
                                          request.mesh, request.plan, options));
    Generator generator(5);
    DT_ASSIGN_OR_RETURN(
        testing::TokenBatch data,
        testing::UniformTokenBatch(generator, request.config.vocab_size,
                                   request.batch, request.seq));
    DT_ASSIGN_OR_RETURN(auto batch,
                        trainer->MakeBatch(data.tokens, data.targets));
    for (int step = 0; step < 2; ++step) {
      if (step == 1) {
        if (++finished_first == request.mesh.size()) {
          ResetPeakLiveStorageBytes();
        }
        while (finished_first < request.mesh.size()) std::this_thread::yield();
      }
      DT_ASSIGN_OR_RETURN(DTensor loss, trainer->Forward(batch));
      DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, trainer->Backward(loss));
      DT_RETURN_IF_ERROR(trainer->Update(grads));
    }
    return absl::OkStatus();
  }));
  return PeakLiveStorageBytes() / request.mesh.size();
}

TEST(ExplainCheckpointTest, EstimateAgainstThePeakOfLiveBytes) {
  const std::string plan = "tp_sp_fsdp";
  int64_t previous_measured = 0;
  for (const std::string mode : {"", "selective", "full"}) {
    const ExplainRequest request = Request(plan, mode);
    absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request);
    ASSERT_TRUE(report.ok()) << report.status();
    absl::StatusOr<int64_t> measured = MeasuredPeakPerRank(request);
    ASSERT_TRUE(measured.ok()) << measured.status();
    std::cout << "tiny 8 layers, batch 8 x seq 64, " << plan
              << " on dp=2,tp=2, checkpointing "
              << (mode.empty() ? "none" : mode)
              << ": measured peak live bytes per rank " << *measured
              << ", explain total " << report->memory.total()
              << " (peak activations " << report->memory.peak_activations
              << ")\n";
    if (previous_measured > 0) {
      EXPECT_LT(*measured, previous_measured) << mode;
    }
    previous_measured = *measured;
  }
}

}  // namespace
}  // namespace dtensor
