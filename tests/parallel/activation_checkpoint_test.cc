// The plan key "activation_checkpoint" on every shipped plan, on in-process
// ranks (dp=2 x tp=2): losses and gradients of two steps bit-identical to the
// same plan without it, full and selective, and FSDP's backward gathering
// each group once (not once for the recompute and once more for the
// gradients). Parsing of the key and its errors.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/testing/token_batch.h"
#include "gtest/gtest.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int kSteps = 2;
constexpr int64_t kBatch = 3, kSeq = 7;

// Uneven on every split (tests/parallel/training_equivalence_test.cc).
nn::LlamaConfig Config() {
  nn::LlamaConfig c;
  c.n_layers = 2;
  c.dim = 36;
  c.n_heads = 6;
  c.n_kv_heads = 3;
  c.vocab_size = 67;
  c.multiple_of = 1;
  c.ffn_dim_multiplier = 0.99;
  c.max_seq_len = 16;
  c.init_std = 0.1;
  return c;
}

// Rank 0's losses and full gradients per step, and its backward all-gathers
// on dp.
struct TrainRun {
  std::vector<std::vector<float>> values;
  int64_t backward_gathers = 0;
};

absl::StatusOr<std::vector<float>> Full(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(Tensor full, x.FullTensor());
  return full.ToVector<float>();
}

absl::StatusOr<TrainRun> Train(const std::string& plan_name,
                               const std::string& checkpoint_mode) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) return absl::NotFoundError("TEST_SRCDIR is not set");
  DT_ASSIGN_OR_RETURN(
      Plan plan, LoadPlanFile(absl::StrCat(srcdir, "/dtensor/parallel/plans/",
                                           plan_name, ".json")));
  if (!checkpoint_mode.empty()) {
    plan.activation_checkpoint = {{"layers.*"}, checkpoint_mode};
  }
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag("dp=2,tp=2"));
  LlamaTrainerOptions options;
  options.config = Config();
  options.seed = 7;
  TrainRun result;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(
        auto trainer,
        LlamaTrainer::Create(Runtime::ForRank(groups), mesh, plan, options));
    TrainRun mine;
    for (int step = 0; step < kSteps; ++step) {
      Generator generator(1234, static_cast<uint64_t>(step));
      DT_ASSIGN_OR_RETURN(
          testing::TokenBatch data,
          testing::UniformTokenBatch(generator, options.config.vocab_size,
                                     kBatch, kSeq));
      DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                          trainer->MakeBatch(data.tokens, data.targets));
      DT_ASSIGN_OR_RETURN(DTensor loss, trainer->Forward(batch));
      CommCounter backward;
      std::vector<DTensor> grads;
      {
        CommCounter::Scope counting(backward);
        DT_ASSIGN_OR_RETURN(grads, trainer->Backward(loss));
      }
      // All-gathers on dp (mesh dim 0): FSDP's (tp's are on dim 1, and the
      // recompute repeats those of forward).
      for (const CommCounter::Event& e : backward.events()) {
        const bool on_dp = e.mesh_dims == std::vector<int64_t>{0};
        mine.backward_gathers += e.kind == CommKind::kAllGather && on_dp;
      }
      DT_ASSIGN_OR_RETURN(std::vector<float> l, Full(loss));
      mine.values.push_back(std::move(l));
      for (const DTensor& g : grads) {
        DT_ASSIGN_OR_RETURN(std::vector<float> v, Full(g));
        mine.values.push_back(std::move(v));
      }
      DT_RETURN_IF_ERROR(trainer->Update(grads));
    }
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(mine);
    }
    return absl::OkStatus();
  }));
  return result;
}

class ShippedPlanCheckpointTest : public ::testing::TestWithParam<std::string> {
};

TEST_P(ShippedPlanCheckpointTest, GradientsAreBitIdentical) {
  absl::StatusOr<TrainRun> plain = Train(GetParam(), "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const std::string mode : {"full", "selective"}) {
    absl::StatusOr<TrainRun> checkpointed = Train(GetParam(), mode);
    ASSERT_TRUE(checkpointed.ok()) << mode << ": " << checkpointed.status();
    ASSERT_EQ(checkpointed->values.size(), plain->values.size());
    for (size_t i = 0; i < plain->values.size(); ++i) {
      const std::vector<float>& a = checkpointed->values[i];
      const std::vector<float>& b = plain->values[i];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << mode << ": value " << i << " (loss, then gradients, per step)";
    }
    // FSDP: the recompute and the gradients share one gather per group.
    EXPECT_EQ(checkpointed->backward_gathers, plain->backward_gathers) << mode;
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, ShippedPlanCheckpointTest,
                         ::testing::Values("tp_dp", "tp_fsdp", "tp_sp_dp",
                                           "tp_sp_fsdp",
                                           "tp_sp_loss_parallel_dp",
                                           "tp_sp_loss_parallel_fsdp"));

TEST(ActivationCheckpointPlanTest, ParsesListsAndObjects) {
  absl::StatusOr<Plan> list =
      ParsePlan(R"({"activation_checkpoint": ["layers.*"]})");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->activation_checkpoint.modules,
            std::vector<std::string>{"layers.*"});
  EXPECT_EQ(list->activation_checkpoint.mode, "full");
  absl::StatusOr<Plan> object = ParsePlan(
      R"({"activation_checkpoint": {"modules": ["layers.*.attention"],
          "mode": "selective", "saved_ops": ["linear"]}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->activation_checkpoint.mode, "selective");
  EXPECT_EQ(object->activation_checkpoint.saved_ops,
            std::vector<std::string>{"linear"});
  for (
      const char* bad :
      {R"({"activation_checkpoint": "layers.*"})",
       R"({"activation_checkpoint": []})",
       R"({"activation_checkpoint": {"mode": "full"}})",
       R"({"activation_checkpoint": {"modules": ["x"], "mode": "some"}})",
       R"({"activation_checkpoint": {"modules": ["x"], "saved_ops": ["linear"]}})",
       R"({"activation_checkpoint": {"modules": ["x"], "every": 2}})"}) {
    EXPECT_EQ(ParsePlan(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ActivationCheckpointPlanTest, APatternNamingNoModuleFails) {
  Plan plan;
  plan.activation_checkpoint = {{"blocks.*"}};
  absl::StatusOr<DeviceMesh> mesh = ParseMeshFlag("dp=1");
  ASSERT_TRUE(mesh.ok());
  LlamaTrainerOptions options;
  options.config = Config();
  absl::StatusOr<std::unique_ptr<LlamaTrainer>> trainer =
      LlamaTrainer::Create(Runtime::MetadataOnly(0), *mesh, plan, options);
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.status().message().find("blocks.*"), std::string::npos)
      << trainer.status();
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
