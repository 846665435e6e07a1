// cross_entropy under loss parallel and with sharded rows on DTensors: the
// bytes it moves (metadata-only, logits of realistic size), the collectives
// it issues on ranks, and its losses against the single-rank loss.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::IssuedCollectiveSequence;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;

// Bytes a rank receives in a ring all-reduce of `bytes` over `n` ranks.
double AllReduceBytes(int64_t n, double bytes) {
  return 2.0 * (n - 1) / n * bytes;
}

MetaOutcome CrossEntropyOnMeta(const std::vector<int64_t>& mesh,
                               const Shape& logits_shape,
                               const std::string& logits,
                               const std::string& target, Reduction reduction) {
  return RunOnMeta(
      mesh, {{logits_shape, logits}, {{logits_shape[0]}, target, DType::kI64}},
      [reduction](const In& in) {
        return ops::CrossEntropy(in[0], in[1], reduction);
      });
}

// Logits of realistic size, where moving them would cost far more than the
// two collective launches of loss parallel.
TEST(VocabShardingTest, LossParallelReducesBatchSizedVectorsNotLogits) {
  for (Reduction reduction :
       {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    // 1024 tokens, 32000 classes on 4 ranks: a max of 1024 floats, then 1024
    // sums of exp with 1024 target logits.
    const MetaOutcome o =
        CrossEntropyOnMeta({4}, {1024, 32000}, "S(1)", "R", reduction);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "R");
    EXPECT_EQ(o.comms.count(CommKind::kAllGather), 0);
    EXPECT_EQ(o.comms.count(CommKind::kAllToAll), 0);
    EXPECT_EQ(o.comms.count(CommKind::kAllReduce), 2);
    EXPECT_DOUBLE_EQ(o.comms.total_bytes(),
                     AllReduceBytes(4, 1024 * 4) + AllReduceBytes(4, 2048 * 4));
  }
}

// Small class-sharded logits: an all-to-all onto the rows is the cheapest
// move alone, but a summed loss over sharded rows is a P(sum) that costs one
// more all-reduce to read; gathering the logits gives the complete loss after
// one collective, as PyTorch does.
TEST(VocabShardingTest, SummedLossOfSmallClassShardedLogitsEndsComplete) {
  const MetaOutcome o =
      CrossEntropyOnMeta({4}, {8, 16}, "S(1)", "R", Reduction::kSum);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "R");
  EXPECT_EQ(o.comms.total_collectives(), 1);
}

// The mesh dims of each collective `comms` issued (local steps skipped).
std::vector<std::vector<int64_t>> CollectiveMeshDims(const CommCounter& comms) {
  std::vector<std::vector<int64_t>> dims;
  for (const CommCounter::Event& e : comms.events()) {
    if (e.kind != CommKind::kLocal) dims.push_back(e.mesh_dims);
  }
  return dims;
}

// Exactly loss parallel's collectives: two all-reduces, both over tp (mesh
// dim 1).
void ExpectOnlyLossParallelAllReduces(const CommCounter& comms,
                                      const std::string& name) {
  EXPECT_THAT(comms, IssuedCollectiveSequence(
                         {CommKind::kAllReduce, CommKind::kAllReduce}))
      << name;
  EXPECT_EQ(CollectiveMeshDims(comms),
            (std::vector<std::vector<int64_t>>{{1}, {1}}))
      << name;
}

// Loss parallel with a summed loss on dp x tp, the rows replicated on dp:
// slicing them on dp would be free and shrink the batch-sized all-reduces,
// but it leaves a P(sum) loss on dp that the caller's layouts did not imply
// and that costs one more all-reduce to read. PyTorch returns the complete
// loss after the loss-parallel all-reduces over tp; so does the engine
// (docs/ops.md, "The cost rule").
TEST(VocabShardingTest, SummedLossParallelOverReplicatedRowsEndsComplete) {
  for (const std::vector<int64_t>& mesh :
       std::vector<std::vector<int64_t>>{{2, 2}, {2, 3}, {4, 2}}) {
    const MetaOutcome o = CrossEntropyOnMeta(mesh, {1024, 32000}, "R,S(1)",
                                             "R,R", Reduction::kSum);
    const std::string name = absl::StrJoin(mesh, "x");
    ASSERT_TRUE(o.status.ok()) << name << ": " << o.status;
    EXPECT_EQ(o.sharding, "R,R") << name;
    ExpectOnlyLossParallelAllReduces(o.comms, name);
    EXPECT_DOUBLE_EQ(
        o.comms.total_bytes(),
        AllReduceBytes(mesh[1], 1024 * 4) + AllReduceBytes(mesh[1], 2048 * 4))
        << name;
  }
}

// The same on ranks, under LossParallelScope (small logits, which the cost
// model alone would gather): the loss is complete on every rank after the two
// all-reduces over tp and equals the single-rank loss of the full tensors.
TEST(VocabShardingTest, SummedLossParallelOnRanksEqualsTheSingleRankLoss) {
  for (const std::vector<int64_t>& mesh_shape :
       std::vector<std::vector<int64_t>>{{2, 2}, {2, 3}, {4, 2}}) {
    const std::string name = absl::StrJoin(mesh_shape, "x");
    const DeviceMesh mesh = *DeviceMesh::Create(mesh_shape);
    LocalCluster cluster(mesh.size());
    // 20 classes: uneven on tp = 3 (7, 7, 6); one target ignored.
    std::mt19937 rng(5);
    const Tensor logits = RandomTensor({6, 20}, DType::kF32, -3, 3, rng);
    const Tensor target =
        *Tensor::FromVector<int64_t>({19, 0, -100, 7, 13, 6}, {6});
    const Tensor expected = *CrossEntropy(logits, target, Reduction::kSum);
    std::vector<CommCounter> counters(mesh.size());
    const absl::Status status =
        cluster.Run([&](ProcessGroups& groups) -> absl::Status {
          auto runtime = Runtime::ForRank(groups);
          DT_ASSIGN_OR_RETURN(
              DTensor x, DTensor::Distribute(
                             runtime, logits, mesh,
                             {Placement::Replicate(), Placement::Shard(1)}));
          DT_ASSIGN_OR_RETURN(
              DTensor t, DTensor::Distribute(
                             runtime, target, mesh,
                             {Placement::Replicate(), Placement::Replicate()}));
          DTensor loss;
          {
            CommCounter::Scope scope(counters[runtime->rank()]);
            ops::LossParallelScope loss_parallel;
            DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(x, t, Reduction::kSum));
          }
          if (loss.sharding().ToString() != "R,R" ||
              !AllClose(loss.ToLocal(), expected, 1e-5, 1e-6)) {
            return absl::InternalError(absl::StrCat(
                loss.spec().ToString(), " ", loss.ToLocal().ToString(),
                ", expected ", expected.ToString()));
          }
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << name << ": " << status;
    for (size_t rank = 0; rank < counters.size(); ++rank) {
      ExpectOnlyLossParallelAllReduces(counters[rank],
                                       absl::StrCat(name, " rank ", rank));
    }
  }
}

TEST(VocabShardingTest, BatchShardedMeanCountsTargetsWithOneSmallAllReduce) {
  // 1025 tokens (513, 512) on mesh dim 0, 32000 classes on mesh dim 1.
  const Shape shape = {1025, 32000};
  MetaOutcome o = CrossEntropyOnMeta({2, 2}, shape, "S(0),S(1)", "S(0),R",
                                     Reduction::kMean);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "R,R");
  EXPECT_EQ(o.comms.count(CommKind::kAllReduce), 3);
  EXPECT_EQ(o.comms.total_collectives(), 3);
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), AllReduceBytes(2, 513 * 4) +
                                              AllReduceBytes(2, 1026 * 4) +
                                              AllReduceBytes(2, 16));
  // A sum needs no count; per-sample losses stay sharded.
  o = CrossEntropyOnMeta({2, 2}, shape, "S(0),S(1)", "S(0),R", Reduction::kSum);
  EXPECT_EQ(o.sharding, "P(sum),R");
  EXPECT_EQ(o.comms.total_collectives(), 2);
  o = CrossEntropyOnMeta({2, 2}, shape, "S(0),S(1)", "S(0),R",
                         Reduction::kNone);
  EXPECT_EQ(o.sharding, "S(0),R");
  EXPECT_EQ(o.comms.total_collectives(), 2);
  o = CrossEntropyOnMeta({4}, shape, "S(0)", "S(0)", Reduction::kNone);
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

TEST(VocabShardingTest, LossParallelOnRanksCommunicatesOnlyTheReductions) {
  // Uneven: 62 classes on 4 ranks (16, 16, 16, 14), 4 samples, one ignored.
  // A slow link makes bytes dominate, as they do at realistic sizes.
  LocalCluster cluster(4);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  std::mt19937 rng(4);
  const Tensor logits = RandomTensor({4, 62}, DType::kF32, -3, 3, rng);
  const Tensor target = *Tensor::FromVector<int64_t>({61, 0, -100, 47}, {4});
  const Tensor expected = *CrossEntropy(logits, target);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        MeshDimLink slow;
        slow.bandwidth_gbps = 0.001;
        DT_RETURN_IF_ERROR(runtime->SetLinks(mesh, {slow}));
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            DTensor::Distribute(runtime, logits, mesh, {Placement::Shard(1)}));
        DT_ASSIGN_OR_RETURN(DTensor t,
                            DTensor::Distribute(runtime, target, mesh,
                                                {Placement::Replicate()}));
        CommCounter counter;
        DTensor loss;
        {
          CommCounter::Scope scope(counter);
          DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(x, t));
        }
        if (counter.count(CommKind::kAllReduce) != 2 ||
            counter.total_collectives() != 2) {
          return absl::InternalError(
              absl::StrCat(counter.total_collectives(), " collectives"));
        }
        if (!loss.placements()[0].is_replicate() ||
            !AllClose(loss.ToLocal(), expected, 1e-5, 1e-6)) {
          return absl::InternalError(loss.ToLocal().ToString());
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
