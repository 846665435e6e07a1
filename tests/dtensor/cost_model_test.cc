#include "dtensor/redistribute/cost_model.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// The expected values below are the contract's formula written out by hand:
// launch + hops * hop + received / bandwidth, with 1 GB = 1e9 bytes, so
// bytes / (x GB/s) = bytes / (x * 1e3) microseconds.

constexpr double kTolerance = 1e-9;

TEST(CommKindNameTest, NamesEveryKind) {
  EXPECT_EQ(CommKindName(CommKind::kAllGather), "all_gather");
  EXPECT_EQ(CommKindName(CommKind::kAllReduce), "all_reduce");
  EXPECT_EQ(CommKindName(CommKind::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(CommKindName(CommKind::kAllToAll), "all_to_all");
  EXPECT_EQ(CommKindName(CommKind::kPermute), "permute");
  EXPECT_EQ(CommKindName(CommKind::kLocal), "local");
}

TEST(CostModelTest, DefaultsArePyTorchConstants) {
  const CostModel model(3);
  EXPECT_EQ(model.mesh_ndim(), 3);
  EXPECT_DOUBLE_EQ(model.launch_us(), 6.6);
  ASSERT_EQ(model.links().size(), 3u);
  for (const MeshDimLink& link : model.links()) {
    EXPECT_DOUBLE_EQ(link.bandwidth_gbps, 87.7);
    EXPECT_DOUBLE_EQ(link.hop_latency_us, 0.6);
  }
}

TEST(CostModelTest, ReceivedBytesPerKind) {
  // n = 4 ranks, B = 1000 bytes held before the step.
  EXPECT_DOUBLE_EQ(CostModel::ReceivedBytes(CommKind::kAllGather, 4, 1000),
                   3000);
  EXPECT_DOUBLE_EQ(CostModel::ReceivedBytes(CommKind::kReduceScatter, 4, 1000),
                   750);
  EXPECT_DOUBLE_EQ(CostModel::ReceivedBytes(CommKind::kAllToAll, 4, 1000), 750);
  EXPECT_DOUBLE_EQ(CostModel::ReceivedBytes(CommKind::kAllReduce, 4, 1000),
                   1500);
  EXPECT_DOUBLE_EQ(CostModel::ReceivedBytes(CommKind::kPermute, 4, 1000), 1000);
  EXPECT_DOUBLE_EQ(CostModel::ReceivedBytes(CommKind::kLocal, 4, 1000), 0);
  // n = 3: fractions that are not exact in binary.
  EXPECT_NEAR(CostModel::ReceivedBytes(CommKind::kAllReduce, 3, 900), 1200,
              kTolerance);
  EXPECT_NEAR(CostModel::ReceivedBytes(CommKind::kAllToAll, 3, 900), 600,
              kTolerance);
}

TEST(CostModelTest, EveryKindOnOneDefaultMeshDim) {
  const CostModel model(1);
  const std::vector<int64_t> mesh = {4};
  const double bytes = 1e6;
  // All-gather: 3 hops, 3 MB received.
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllGather, {0}, mesh, bytes),
              6.6 + 3 * 0.6 + 3e6 / 87.7e3, kTolerance);
  // The same, fully evaluated: guards against another unit for GB.
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllGather, {0}, mesh, bytes),
              42.60752565564424, 1e-9);
  // Reduce-scatter and all-to-all: 3 hops, 3/4 MB.
  EXPECT_NEAR(model.StepCostUs(CommKind::kReduceScatter, {0}, mesh, bytes),
              6.6 + 3 * 0.6 + 0.75e6 / 87.7e3, kTolerance);
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllToAll, {0}, mesh, bytes),
              16.95188141391106, 1e-9);
  // All-reduce: 6 hops, 2 * 3/4 MB.
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllReduce, {0}, mesh, bytes),
              6.6 + 6 * 0.6 + 1.5e6 / 87.7e3, kTolerance);
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllReduce, {0}, mesh, bytes),
              27.30376282782212, 1e-9);
  // Permute: one hop, the whole local block.
  EXPECT_NEAR(model.StepCostUs(CommKind::kPermute, {0}, mesh, bytes),
              6.6 + 0.6 + 1e6 / 87.7e3, kTolerance);
  EXPECT_EQ(model.StepCostUs(CommKind::kLocal, {0}, mesh, bytes), 0);
}

TEST(CostModelTest, OneGigabyteIsTenToTheNineBytes) {
  absl::StatusOr<CostModel> model = CostModel::Create({{100, 0}}, 0);
  ASSERT_TRUE(model.ok()) << model.status();
  // 1e11 bytes at 100 GB/s take one second.
  EXPECT_NEAR(model->StepCostUs(CommKind::kPermute, {0}, {2}, 1e11), 1e6, 1e-6);
}

TEST(CostModelTest, NoBytesCostLatencyOnly) {
  const CostModel model(1);
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllGather, {0}, {8}, 0),
              6.6 + 7 * 0.6, kTolerance);
  EXPECT_NEAR(model.StepCostUs(CommKind::kAllReduce, {0}, {8}, 0),
              6.6 + 14 * 0.6, kTolerance);
  EXPECT_NEAR(model.StepCostUs(CommKind::kPermute, {0}, {8}, 0), 6.6 + 0.6,
              kTolerance);
}

// A step over several mesh dims runs on their flattened group: the product
// of their sizes, the slowest bandwidth, the largest hop latency (taken from
// different dims here, so mixing them up shows).
TEST(CostModelTest, SeveralMeshDimsUseProductSlowestLinkLargestHop) {
  absl::StatusOr<CostModel> model =
      CostModel::Create({{/*bandwidth_gbps=*/100, /*hop_latency_us=*/2.0},
                         {/*bandwidth_gbps=*/20, /*hop_latency_us=*/0.5},
                         {/*bandwidth_gbps=*/50, /*hop_latency_us=*/1.0}},
                        /*launch_us=*/5.0);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int64_t> mesh = {2, 4, 3};
  const double bytes = 6e5;
  // Dims {0, 2}: n = 6, bandwidth 50 (dim 2), hop 2.0 (dim 0).
  EXPECT_NEAR(model->StepCostUs(CommKind::kAllGather, {0, 2}, mesh, bytes),
              5.0 + 5 * 2.0 + 5 * 6e5 / 50e3, kTolerance);
  // The order the dims are listed in does not matter.
  EXPECT_NEAR(model->StepCostUs(CommKind::kAllGather, {2, 0}, mesh, bytes),
              5.0 + 5 * 2.0 + 5 * 6e5 / 50e3, kTolerance);
  // Dims {1, 2}: n = 12, bandwidth 20 (dim 1), hop 1.0 (dim 2).
  EXPECT_NEAR(model->StepCostUs(CommKind::kAllReduce, {1, 2}, mesh, bytes),
              5.0 + 22 * 1.0 + 2.0 * 11 / 12 * 6e5 / 20e3, kTolerance);
  EXPECT_NEAR(model->StepCostUs(CommKind::kReduceScatter, {1, 2}, mesh, bytes),
              5.0 + 11 * 1.0 + 11.0 / 12 * 6e5 / 20e3, kTolerance);
  // All three: n = 24, bandwidth 20, hop 2.0.
  EXPECT_NEAR(model->StepCostUs(CommKind::kAllToAll, {0, 1, 2}, mesh, bytes),
              5.0 + 23 * 2.0 + 23.0 / 24 * 6e5 / 20e3, kTolerance);
  EXPECT_NEAR(model->StepCostUs(CommKind::kPermute, {0, 1, 2}, mesh, bytes),
              5.0 + 1 * 2.0 + 6e5 / 20e3, kTolerance);
  // One dim alone uses its own link.
  EXPECT_NEAR(model->StepCostUs(CommKind::kAllToAll, {0}, mesh, bytes),
              5.0 + 1 * 2.0 + 0.5 * 6e5 / 100e3, kTolerance);
  EXPECT_NEAR(model->StepCostUs(CommKind::kAllGather, {1}, mesh, bytes),
              5.0 + 3 * 0.5 + 3 * 6e5 / 20e3, kTolerance);
  EXPECT_EQ(model->StepCostUs(CommKind::kLocal, {0, 1, 2}, mesh, bytes), 0);
}

TEST(CostModelTest, CreateKeepsLinksAndLaunch) {
  absl::StatusOr<CostModel> model =
      CostModel::Create({{19.3, 5.0}, {87.7, 0.6}}, 10.0);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->mesh_ndim(), 2);
  EXPECT_DOUBLE_EQ(model->launch_us(), 10.0);
  EXPECT_DOUBLE_EQ(model->links()[0].bandwidth_gbps, 19.3);
  EXPECT_DOUBLE_EQ(model->links()[0].hop_latency_us, 5.0);
  EXPECT_DOUBLE_EQ(model->links()[1].bandwidth_gbps, 87.7);
  // Zero latencies are allowed.
  EXPECT_TRUE(CostModel::Create({{1, 0}}, 0).ok());
}

// Each bad value is named in the message, with the mesh dim it belongs to.
TEST(CostModelTest, CreateRejectsBadLinks) {
  struct Case {
    std::vector<MeshDimLink> links;
    double launch_us;
    std::vector<std::string> named;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Case cases[] = {
      {{{87.7, 0.6}, {0, 0.6}}, 6.6, {"bandwidth 0", "mesh dim 1"}},
      {{{-5, 0.6}}, 6.6, {"bandwidth -5", "mesh dim 0"}},
      {{{nan, 0.6}}, 6.6, {"bandwidth nan", "mesh dim 0"}},
      {{{87.7, 0.6}, {87.7, 0.6}, {87.7, -0.25}},
       6.6,
       {"hop latency -0.25", "mesh dim 2"}},
      {{{87.7, nan}}, 6.6, {"hop latency nan", "mesh dim 0"}},
      {{{87.7, 0.6}}, -1.5, {"launch latency -1.5"}},
      {{{87.7, 0.6}}, nan, {"launch latency nan"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CostModel> model = CostModel::Create(c.links, c.launch_us);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& text : c.named) {
      EXPECT_NE(model.status().message().find(text), std::string::npos)
          << model.status() << " does not name '" << text << "'";
    }
  }
}

TEST(CostModelTest, EqualityAndHashFollowLinksAndLaunch) {
  absl::StatusOr<CostModel> same =
      CostModel::Create({{87.7, 0.6}, {87.7, 0.6}}, 6.6);
  absl::StatusOr<CostModel> slower =
      CostModel::Create({{87.7, 0.6}, {19.3, 0.6}}, 6.6);
  absl::StatusOr<CostModel> later_hop =
      CostModel::Create({{87.7, 0.7}, {87.7, 0.6}}, 6.6);
  absl::StatusOr<CostModel> later_launch =
      CostModel::Create({{87.7, 0.6}, {87.7, 0.6}}, 7.0);
  ASSERT_TRUE(same.ok() && slower.ok() && later_hop.ok() && later_launch.ok());
  const CostModel defaults(2);
  EXPECT_TRUE(defaults == *same);
  EXPECT_EQ(absl::Hash<CostModel>()(defaults), absl::Hash<CostModel>()(*same));
  EXPECT_FALSE(defaults == *slower);
  EXPECT_FALSE(defaults == *later_hop);
  EXPECT_FALSE(defaults == *later_launch);
  EXPECT_FALSE(defaults == CostModel(3));
}

}  // namespace
}  // namespace dtensor
