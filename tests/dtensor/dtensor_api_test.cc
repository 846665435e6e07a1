// DTensor's constructors and their errors, on in-process ranks.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// Runs `fn` on every rank of `mesh` and expects success.
void RunOnMesh(
    const DeviceMesh& mesh,
    const std::function<absl::Status(std::shared_ptr<Runtime>)>& fn) {
  LocalCluster cluster(mesh.size());
  absl::Status status = cluster.Run(
      [&](ProcessGroups& groups) { return fn(Runtime::ForRank(groups)); });
  EXPECT_TRUE(status.ok()) << status;
}

absl::StatusOr<Tensor> Iota(Shape shape) {
  DT_ASSIGN_OR_RETURN(Tensor flat,
                      Tensor::Arange(0, NumElements(shape), 1, DType::kF32));
  return flat.Reshape(shape);
}

absl::Status Expect(bool condition, const std::string& what) {
  return condition ? absl::OkStatus() : absl::InternalError(what);
}

TEST(DTensorTest, DistributeFromAnySourceRankIgnoresOtherRanksData) {
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  RunOnMesh(mesh, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
    DT_ASSIGN_OR_RETURN(Tensor full, Iota({5, 3}));
    // Only rank 3's data counts; the others pass garbage or nothing.
    Tensor mine = full;
    if (runtime->rank() == 0) mine = Tensor();
    if (runtime->rank() == 1) {
      DT_ASSIGN_OR_RETURN(mine, Tensor::Zeros({2, 2}, DType::kF64));
    }
    DT_ASSIGN_OR_RETURN(DTensor x, DTensor::Distribute(runtime, mine, mesh,
                                                       {Placement::Shard(0),
                                                        Placement::Shard(1)},
                                                       {}, /*src_rank=*/3));
    DT_RETURN_IF_ERROR(Expect(x.shape() == Shape({5, 3}), "global shape"));
    DT_ASSIGN_OR_RETURN(ShardBlock block, x.LocalBlock());
    DT_ASSIGN_OR_RETURN(Tensor expected,
                        full.Narrow(0, block.offset[0], block.shape[0]));
    DT_ASSIGN_OR_RETURN(expected,
                        expected.Narrow(1, block.offset[1], block.shape[1]));
    DT_RETURN_IF_ERROR(Expect(AllClose(x.ToLocal(), expected), "local shard"));
    DT_ASSIGN_OR_RETURN(Tensor back, x.FullTensor());
    return Expect(AllClose(back, full), "full tensor");
  });
}

TEST(DTensorTest, DistributePartialSumKeepsOneTermPerGroup) {
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  RunOnMesh(mesh, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
    DT_ASSIGN_OR_RETURN(Tensor full, Iota({3, 2}));
    DT_ASSIGN_OR_RETURN(DTensor x, DTensor::Distribute(runtime, full, mesh,
                                                       {Placement::Partial()}));
    // Rank 0 holds the value, the others zeros; the sum is the value.
    const double expected_sum = runtime->rank() == 0 ? 15.0 : 0.0;
    double sum = 0;
    const std::vector<float> host_values =
        x.ToLocal().ToVector<float>().value();
    for (float v : host_values) sum += v;
    DT_RETURN_IF_ERROR(Expect(sum == expected_sum, "partial term"));
    DT_ASSIGN_OR_RETURN(Tensor back, x.FullTensor());
    return Expect(AllClose(back, full), "reduced value");
  });
}

TEST(DTensorTest, FromLocalLearnsUnevenGlobalShapeFromPeers) {
  const DeviceMesh mesh = *DeviceMesh::Create({4, 2});
  RunOnMesh(mesh, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
    // 18 rows on (4,2) with [S(0),S(0)]: the blocks of the chunk rule.
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                        mesh.CoordinateOf(runtime->rank()));
    const int64_t rows_by_dp[4][2] = {{3, 2}, {3, 2}, {3, 2}, {2, 1}};
    DT_ASSIGN_OR_RETURN(
        Tensor local,
        Tensor::Ones({rows_by_dp[coord[0]][coord[1]], 2}, DType::kF32));
    FromLocalOptions options;
    options.run_check = true;
    DT_ASSIGN_OR_RETURN(
        DTensor x, DTensor::FromLocal(
                       runtime, local, mesh,
                       {Placement::Shard(0), Placement::Shard(0)}, options));
    return Expect(x.shape() == Shape({18, 2}),
                  absl::StrCat("global shape ", ShapeToString(x.shape())));
  });
}

TEST(DTensorTest, FromLocalRunCheckNamesTheRankThatDisagrees) {
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  LocalCluster cluster(2);
  std::vector<absl::Status> statuses =
      cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        // Rank 1 claims 3 rows of a [4, 2] tensor sharded in halves.
        DT_ASSIGN_OR_RETURN(
            Tensor local,
            Tensor::Ones({groups.rank() == 1 ? 3 : 2, 2}, DType::kF32));
        FromLocalOptions options;
        options.global_shape = Shape{4, 2};
        options.run_check = true;
        return DTensor::FromLocal(runtime, local, mesh, {Placement::Shard(0)},
                                  options)
            .status();
      });
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "rank 1")) << status;
  }
}

TEST(DTensorTest, RedistributeErrorsNameTheShardings) {
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  RunOnMesh(mesh, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
    DT_ASSIGN_OR_RETURN(Tensor full, Iota({4, 2}));
    DT_ASSIGN_OR_RETURN(
        DTensor sharded,
        DTensor::Distribute(runtime, full, mesh, {Placement::Shard(0)}));
    absl::StatusOr<DTensor> bad = sharded.Redistribute({Placement::Partial()});
    DT_RETURN_IF_ERROR(
        Expect(!bad.ok() && absl::StrContains(bad.status().message(), "S(0)") &&
                   absl::StrContains(bad.status().message(), "P(sum)"),
               absl::StrCat("S -> P: ", bad.status().ToString())));
    DT_ASSIGN_OR_RETURN(
        DTensor partial,
        DTensor::Distribute(runtime, full, mesh, {Placement::Partial()}));
    bad = partial.Redistribute({Placement::Partial(ReduceOp::kMax)});
    DT_RETURN_IF_ERROR(
        Expect(!bad.ok() && absl::StrContains(bad.status().message(), "P(max)"),
               absl::StrCat("P(sum) -> P(max): ", bad.status().ToString())));
    bad = sharded.Redistribute({Placement::Shard(2)});
    DT_RETURN_IF_ERROR(
        Expect(!bad.ok() && absl::StrContains(bad.status().message(), "2"),
               absl::StrCat("dim out of range: ", bad.status().ToString())));
    bad = sharded.Redistribute({Placement::Shard(0), Placement::Replicate()});
    return Expect(!bad.ok(), "placement count");
  });
}

TEST(DTensorTest, FromLocalRejectsRanksOutsideTheMesh) {
  // A mesh over ranks {0, 1} used by rank 2.
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  LocalCluster cluster(3);
  std::vector<absl::Status> statuses =
      cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
        if (groups.rank() != 2) return absl::OkStatus();
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor local, Tensor::Ones({2}, DType::kF32));
        FromLocalOptions options;
        options.global_shape = Shape{4};
        return DTensor::FromLocal(runtime, local, mesh, {Placement::Shard(0)},
                                  options)
            .status();
      });
  EXPECT_FALSE(statuses[2].ok());
  EXPECT_TRUE(absl::StrContains(statuses[2].message(), "2")) << statuses[2];
}

TEST(DTensorTest, MetadataOnlyRecordsWithoutData) {
  const DeviceMesh mesh = *DeviceMesh::Create({64, 8});
  auto runtime = Runtime::MetadataOnly(/*rank=*/5);
  absl::StatusOr<DTensorSpec> spec =
      DTensorSpec::Create(mesh, {Placement::Shard(0), Placement::Shard(1)},
                          {4096, 4096}, DType::kBF16);
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<DTensor> x = DTensor::FromSpec(runtime, *spec);
  ASSERT_TRUE(x.ok()) << x.status();
  CommCounter counter;
  {
    CommCounter::Scope scope(counter);
    absl::StatusOr<DTensor> y =
        x->Redistribute({Placement::Replicate(), Placement::Shard(1)});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_FALSE(y->ToLocal().defined());
  }
  // One all-gather over the 64 ranks of mesh dim 0: each receives 63 blocks
  // of 64 x 512 bf16 values.
  EXPECT_EQ(counter.count(CommKind::kAllGather), 1);
  EXPECT_EQ(counter.total_collectives(), 1);
  EXPECT_DOUBLE_EQ(counter.bytes(CommKind::kAllGather), 63.0 * 64 * 512 * 2);
  const std::string trace = counter.ChromeTraceJson(5);
  EXPECT_TRUE(absl::StrContains(trace, "\"name\":\"all_gather\"")) << trace;
  EXPECT_TRUE(absl::StrContains(trace, "\"tid\":5")) << trace;
  // Distribute needs data.
  EXPECT_FALSE(
      DTensor::Distribute(runtime, Tensor(), mesh,
                          {Placement::Replicate(), Placement::Replicate()})
          .ok());
}

}  // namespace
}  // namespace dtensor
