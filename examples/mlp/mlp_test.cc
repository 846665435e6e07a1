// The MLP example against one rank: trained on dp x tp meshes (even and
// uneven shards) it reaches the one-rank losses and parameters; its plan file
// trains as the plan in code; the trainer syncs the data-parallel gradients
// with one bucketed all-reduce per step, not one per parameter.
#include "examples/mlp/mlp.h"

#include <cmath>
#include <cstdint>

#include "dtensor/comm_counter.h"
#include "dtensor/parallel/plan.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace examples {
namespace {

DeviceMesh Mesh(int64_t dp, int64_t tp) {
  return *DeviceMesh::Create({dp, tp}, {"dp", "tp"});
}

void ExpectSameTraining(const MlpRun& got, const MlpRun& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want.losses[i], 1e-5 * want.losses[i])
        << "step " << i;
  }
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (const auto& [name, value] : want.parameters) {
    EXPECT_TRUE(AllClose(got.parameters.at(name), value, 1e-4, 1e-5)) << name;
  }
}

TEST(MlpTest, DpTimesTpTrainsAsOneRank) {
  for (const auto& [hidden, batch] : {std::pair<int64_t, int64_t>{64, 8},
                                      std::pair<int64_t, int64_t>{63, 7}}) {
    MlpOptions options;
    options.hidden = hidden;
    options.batch = batch;
    absl::StatusOr<MlpRun> one = TrainMlp(Mesh(1, 1), MlpPlan(), options);
    ASSERT_TRUE(one.ok()) << one.status();
    // Training moves the loss: the comparison is not of untrained models.
    EXPECT_LT(one->losses.back(), one->losses.front());
    for (const auto& [dp, tp] :
         {std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{4, 1},
          std::pair<int64_t, int64_t>{1, 4}}) {
      SCOPED_TRACE(testing::Message()
                   << "dp=" << dp << " tp=" << tp << " hidden=" << hidden);
      absl::StatusOr<MlpRun> many = TrainMlp(Mesh(dp, tp), MlpPlan(), options);
      ASSERT_TRUE(many.ok()) << many.status();
      ExpectSameTraining(*many, *one);
    }
  }
}

// "dp": "fsdp": every Linear is an FSDP group (its parameters sharded on dp,
// gathered for its forward and backward, its gradients reduce-scattered),
// with and without tp; the training equals one rank's.
TEST(MlpTest, FullyShardedTrainsAsOneRank) {
  MlpOptions options;
  options.hidden = 63;
  options.batch = 7;
  absl::StatusOr<MlpRun> one = TrainMlp(Mesh(1, 1), MlpPlan(), options);
  ASSERT_TRUE(one.ok()) << one.status();
  for (const auto& [dp, tp] :
       {std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{4, 1}}) {
    SCOPED_TRACE(testing::Message() << "dp=" << dp << " tp=" << tp);
    parallel::Plan plan = MlpPlan();
    plan.dp = parallel::DataParallel::kFsdp;
    absl::StatusOr<MlpRun> many = TrainMlp(Mesh(dp, tp), plan, options);
    ASSERT_TRUE(many.ok()) << many.status();
    ExpectSameTraining(*many, *one);
    EXPECT_GE(many->backward.count(CommKind::kReduceScatter), 1)
        << many->backward.Summary();
    EXPECT_GE(many->forward.count(CommKind::kAllGather), 2)
        << many->forward.Summary();
  }
}

TEST(MlpTest, PlanFileTrainsAsPlanInCode) {
  absl::StatusOr<parallel::Plan> file =
      parallel::LoadPlanFile("examples/mlp/mlp_plan.json");
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<MlpRun> from_file = TrainMlp(Mesh(2, 2), *file);
  absl::StatusOr<MlpRun> from_code = TrainMlp(Mesh(2, 2), MlpPlan());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_code.ok()) << from_code.status();
  EXPECT_EQ(from_file->losses, from_code->losses);
}

// With "dp": "replicate" on dp=2 the four parameter gradients (2128 floats:
// 16x64 + 64 + 64x16 + 16) are all-reduced as one bucket: one all_reduce of
// 8512 bytes, of which a rank of 2 receives (n-1)/n of the reduce-scatter's
// and of the all-gather's half: 2 * 8512 / 2 = 8512 bytes. Forward and the
// update communicate nothing.
TEST(MlpTest, DataParallelStepIsOneBucketedAllReduce) {
  absl::StatusOr<MlpRun> run = TrainMlp(Mesh(2, 1), MlpPlan());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->forward.total_collectives(), 0) << run->forward.Summary();
  EXPECT_EQ(run->backward.total_collectives(), 1) << run->backward.Summary();
  EXPECT_EQ(run->backward.count(CommKind::kAllReduce), 1)
      << run->backward.Summary();
  EXPECT_EQ(run->backward.bytes(CommKind::kAllReduce), 8512)
      << run->backward.Summary();
  EXPECT_EQ(run->update.total_collectives(), 0) << run->update.Summary();
}

// On dp x tp the dp all-reduces are still one bucket; tp's activation
// gradients come on top (mesh dim 1).
TEST(MlpTest, DataParallelGradientsAreOneBucketOnTheDpDim) {
  absl::StatusOr<MlpRun> run = TrainMlp(Mesh(2, 2), MlpPlan());
  ASSERT_TRUE(run.ok()) << run.status();
  int64_t dp_all_reduces = 0;
  for (const CommCounter::Event& event : run->backward.events()) {
    if (event.kind == CommKind::kAllReduce &&
        event.mesh_dims == std::vector<int64_t>{0}) {
      ++dp_all_reduces;
    }
  }
  EXPECT_EQ(dp_all_reduces, 1) << run->backward.Summary();
}

}  // namespace
}  // namespace examples
}  // namespace dtensor
