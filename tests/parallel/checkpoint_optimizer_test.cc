// A training run checkpointed (parameters and AdamW state) on one mesh and
// resumed on another mesh with other layouts continues exactly as the
// uninterrupted run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/parallel/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/parallel/checkpoint_test_util.h"

namespace dtensor {
namespace {

struct TrainingMesh {
  DeviceMesh mesh;
  Placement w_placement;
  Placement b_placement;
};

// The gradients of step `step`, laid out like the parameters.
absl::StatusOr<std::vector<DTensor>> Grads(std::shared_ptr<Runtime> runtime,
                                           const TrainingMesh& setup,
                                           int64_t step) {
  DT_ASSIGN_OR_RETURN(Tensor gw,
                      testing::PatternTensor({7, 3}, DType::kF32, step));
  DT_ASSIGN_OR_RETURN(Tensor gb,
                      testing::PatternTensor({5}, DType::kF32, step + 10));
  DT_ASSIGN_OR_RETURN(DTensor w, DTensor::Distribute(runtime, gw, setup.mesh,
                                                     {setup.w_placement}));
  DT_ASSIGN_OR_RETURN(DTensor b, DTensor::Distribute(runtime, gb, setup.mesh,
                                                     {setup.b_placement}));
  return std::vector<DTensor>{w, b};
}

// Parameters w [7, 3] and b [5] (values from `salt`), their AdamW, and the
// state dict of both.
struct Trainer {
  std::vector<DTensor> params;
  std::unique_ptr<nn::AdamW> adam;
  nn::StateDict state;
};

absl::StatusOr<Trainer> MakeTrainer(std::shared_ptr<Runtime> runtime,
                                    const TrainingMesh& setup, int64_t salt) {
  Trainer trainer;
  DT_ASSIGN_OR_RETURN(Tensor w,
                      testing::PatternTensor({7, 3}, DType::kF32, salt));
  DT_ASSIGN_OR_RETURN(Tensor b,
                      testing::PatternTensor({5}, DType::kF32, salt + 1));
  DT_ASSIGN_OR_RETURN(DTensor dw, DTensor::Distribute(runtime, w, setup.mesh,
                                                      {setup.w_placement}));
  DT_ASSIGN_OR_RETURN(DTensor db, DTensor::Distribute(runtime, b, setup.mesh,
                                                      {setup.b_placement}));
  trainer.params = {dw, db};
  nn::AdamWOptions options;
  options.learning_rate = 0.05;
  DT_ASSIGN_OR_RETURN(trainer.adam, nn::AdamW::Create(trainer.params, options));
  DT_ASSIGN_OR_RETURN(trainer.state,
                      trainer.adam->State({"optim.w", "optim.b"}));
  trainer.state["w"] = dw;
  trainer.state["b"] = db;
  return trainer;
}

absl::Status Step(std::shared_ptr<Runtime> runtime, const TrainingMesh& setup,
                  Trainer& trainer, int64_t step) {
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, Grads(runtime, setup, step));
  return trainer.adam->Step(grads);
}

TEST(CheckpointOptimizerTest, ResumedOnAnotherMeshContinuesExactly) {
  const std::string dir = testing::TestDirectory("resume");
  const TrainingMesh first{*DeviceMesh::Create({2}), Placement::Shard(0),
                           Placement::Replicate()};
  const TrainingMesh second{*DeviceMesh::Create({3}, {}, {2, 0, 1}),
                            Placement::Shard(1), Placement::Shard(0)};
  std::vector<double> want_w, want_b;
  absl::Status status =
      testing::RunRanks(2, [&](std::shared_ptr<Runtime> rt) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Trainer trainer, MakeTrainer(rt, first, 1));
        DT_RETURN_IF_ERROR(Step(rt, first, trainer, 1));
        DT_RETURN_IF_ERROR(Step(rt, first, trainer, 2));
        parallel::SaveOptions options;
        options.sync = false;
        DT_RETURN_IF_ERROR(
            parallel::SaveCheckpoint(dir, trainer.state, options));
        DT_RETURN_IF_ERROR(Step(rt, first, trainer, 3));
        DT_ASSIGN_OR_RETURN(Tensor w, trainer.params[0].FullTensor());
        DT_ASSIGN_OR_RETURN(Tensor b, trainer.params[1].FullTensor());
        if (rt->rank() == 0) {
          want_w = w.ToVector<double>().value();
          want_b = b.ToVector<double>().value();
        }
        return absl::OkStatus();
      })[0];
  ASSERT_TRUE(status.ok()) << status;

  std::vector<absl::Status> resumed =
      testing::RunRanks(3, [&](std::shared_ptr<Runtime> rt) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Trainer trainer, MakeTrainer(rt, second, 40));
        DT_RETURN_IF_ERROR(parallel::LoadCheckpoint(dir, trainer.state));
        EXPECT_EQ(trainer.adam->steps(), (std::vector<int64_t>{2, 2}));
        DT_RETURN_IF_ERROR(Step(rt, second, trainer, 3));
        DT_ASSIGN_OR_RETURN(Tensor w, trainer.params[0].FullTensor());
        DT_ASSIGN_OR_RETURN(Tensor b, trainer.params[1].FullTensor());
        EXPECT_EQ(w.ToVector<double>().value(), want_w);
        EXPECT_EQ(b.ToVector<double>().value(), want_b);
        return absl::OkStatus();
      });
  for (const absl::Status& s : resumed) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace dtensor
