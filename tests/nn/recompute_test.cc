// GradientTape::RecomputeInBackward: gradients equal those of the same
// program without it and a plain-loop reference; the gathered storage is
// released once forward drops it (observed through a weak handle on the
// Tensor's storage); backward re-gathers once per tensor; errors.
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/storage.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace nn {
namespace {

constexpr int64_t kBatch = 6, kIn = 5, kOut = 7;

// What one rank observed of: loss = sum(tanh(x W^T) * (x W^T)) + sum(x W^T),
// W used by two ops through its gathered copy G.
struct Observed {
  std::vector<float> grad_w;  // Gathered.
  std::vector<float> grad_x;
  // Whether G's storage was still alive after forward, with the tape alive.
  bool gathered_alive_after_forward = false;
  bool gathered_alive_after_backward = false;
};

std::vector<float> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(rng);
  return v;
}

// Runs the program on `ranks` in-process ranks, W S(0) and x S(0); rank 0's
// observations.
absl::StatusOr<Observed> RunProgram(int64_t ranks, bool recompute) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({ranks}));
  Observed observed;
  std::mutex mu;
  LocalCluster cluster(ranks);
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(Tensor w_full,
                        Tensor::FromVector(Values(kOut * kIn, 1), {kOut, kIn}));
    DT_ASSIGN_OR_RETURN(
        Tensor x_full,
        Tensor::FromVector(Values(kBatch * kIn, 2), {kBatch, kIn}));
    DT_ASSIGN_OR_RETURN(DTensor w, DTensor::Distribute(runtime, w_full, mesh,
                                                       {Placement::Shard(0)}));
    DT_ASSIGN_OR_RETURN(DTensor x, DTensor::Distribute(runtime, x_full, mesh,
                                                       {Placement::Shard(0)}));
    GradientTape tape;
    DTensor loss;
    std::weak_ptr<Storage> gathered_storage;
    {
      GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(DTensor g, w.Redistribute({Placement::Replicate()}));
      if (recompute) {
        DT_RETURN_IF_ERROR(GradientTape::RecomputeInBackward(g, w));
      }
      gathered_storage = g.ToLocal().storage();
      DT_ASSIGN_OR_RETURN(DTensor y, ops::Linear(x, g));
      DT_ASSIGN_OR_RETURN(DTensor t, ops::Tanh(y));
      DT_ASSIGN_OR_RETURN(DTensor ty, ops::Mul(t, y));
      DT_ASSIGN_OR_RETURN(DTensor y2, ops::Linear(x, g));
      DT_ASSIGN_OR_RETURN(DTensor s1, ops::Sum(ty));
      DT_ASSIGN_OR_RETURN(DTensor s2, ops::Sum(y2));
      DT_ASSIGN_OR_RETURN(loss, ops::Add(s1, s2));
    }
    DT_RETURN_IF_ERROR(nn_testing::FlushCollectives(runtime, mesh));
    const bool alive_after_forward = !gathered_storage.expired();
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                        tape.Gradient(loss, {w, x}));
    DT_RETURN_IF_ERROR(nn_testing::FlushCollectives(runtime, mesh));
    const bool alive_after_backward = !gathered_storage.expired();
    if (grads[0].sharding() != w.sharding()) {
      return absl::InternalError("the gradient is not in W's layout");
    }
    DT_ASSIGN_OR_RETURN(Tensor gw, grads[0].FullTensor());
    DT_ASSIGN_OR_RETURN(Tensor gx, grads[1].FullTensor());
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      observed.grad_w = gw.ToVector<float>().value();
      observed.grad_x = gx.ToVector<float>().value();
      observed.gathered_alive_after_forward = alive_after_forward;
      observed.gathered_alive_after_backward = alive_after_backward;
    }
    return absl::OkStatus();
  }));
  return observed;
}

// d loss / dW and d loss / dx in double: y = x W^T, loss = sum(tanh(y) y + y),
// dL/dy = tanh(y) + y (1 - tanh(y)^2) + 1.
void Reference(std::vector<double>& grad_w, std::vector<double>& grad_x) {
  const std::vector<float> w = Values(kOut * kIn, 1);
  const std::vector<float> x = Values(kBatch * kIn, 2);
  grad_w.assign(kOut * kIn, 0);
  grad_x.assign(kBatch * kIn, 0);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t o = 0; o < kOut; ++o) {
      double y = 0;
      for (int64_t i = 0; i < kIn; ++i)
        y += double{x[b * kIn + i]} * w[o * kIn + i];
      const double t = std::tanh(y);
      const double dy = t + y * (1 - t * t) + 1;
      for (int64_t i = 0; i < kIn; ++i) {
        grad_w[o * kIn + i] += dy * x[b * kIn + i];
        grad_x[b * kIn + i] += dy * w[o * kIn + i];
      }
    }
  }
}

void ExpectNear(const std::vector<float>& got,
                const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
  }
}

TEST(RecomputeTest, GradientsEqualWithoutRecomputeAndTheReference) {
  std::vector<double> want_w, want_x;
  Reference(want_w, want_x);
  for (int64_t ranks : {1, 2, 3}) {
    SCOPED_TRACE(ranks);
    auto kept = RunProgram(ranks, /*recompute=*/false);
    auto recomputed = RunProgram(ranks, /*recompute=*/true);
    ASSERT_TRUE(kept.ok()) << kept.status();
    ASSERT_TRUE(recomputed.ok()) << recomputed.status();
    EXPECT_EQ(recomputed->grad_w, kept->grad_w);
    EXPECT_EQ(recomputed->grad_x, kept->grad_x);
    ExpectNear(recomputed->grad_w, want_w);
    ExpectNear(recomputed->grad_x, want_x);
  }
}

TEST(RecomputeTest, TheTapeNoLongerKeepsTheGatheredStorage) {
  auto kept = RunProgram(2, /*recompute=*/false);
  auto recomputed = RunProgram(2, /*recompute=*/true);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(recomputed.ok()) << recomputed.status();
  // Without the declaration the tape holds G until it is destroyed.
  EXPECT_TRUE(kept->gathered_alive_after_forward);
  EXPECT_TRUE(kept->gathered_alive_after_backward);
  // With it, G's storage is freed when forward drops G, and the copy rebuilt
  // in backward is dropped too.
  EXPECT_FALSE(recomputed->gathered_alive_after_forward);
  EXPECT_FALSE(recomputed->gathered_alive_after_backward);
}

DTensor Meta(const std::shared_ptr<Runtime>& runtime, const DeviceMesh& mesh,
             const Shape& shape, Placement placement) {
  return *DTensor::FromSpec(
      runtime, *DTensorSpec::Create(mesh, {placement}, shape, DType::kF32));
}

// The collectives of forward and backward on a metadata-only mesh of 4 (W
// used twice through G); forward's in `forward`, backward's returned.
CommCounter BackwardCollectives(bool recompute, CommCounter& forward) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const DTensor x = Meta(runtime, mesh, {8, 16}, Placement::Shard(0));
  const DTensor w = Meta(runtime, mesh, {32, 16}, Placement::Shard(0));
  GradientTape tape;
  DTensor loss;
  {
    CommCounter::Scope comm_scope(forward);
    GradientTape::Scope scope(tape);
    const DTensor g = *w.Redistribute({Placement::Replicate()});
    if (recompute) {
      EXPECT_TRUE(GradientTape::RecomputeInBackward(g, w).ok());
    }
    const DTensor y = *ops::Relu(*ops::Linear(x, g));
    loss = *ops::Sum(*ops::Linear(y, *ops::Transpose(g, 0, 1)));
  }
  CommCounter backward;
  CommCounter::Scope scope(backward);
  const std::vector<DTensor> grads = *tape.Gradient(loss, {w});
  EXPECT_EQ(grads[0].sharding(), w.sharding());
  return backward;
}

TEST(RecomputeTest, BackwardGathersAgainOnceUnderAMetadataOnlyRuntime) {
  CommCounter forward_kept, forward_recomputed;
  const CommCounter kept = BackwardCollectives(false, forward_kept);
  const CommCounter recomputed = BackwardCollectives(true, forward_recomputed);
  EXPECT_EQ(forward_kept.count(CommKind::kAllGather), 1);
  EXPECT_EQ(forward_recomputed.count(CommKind::kAllGather), 1);
  EXPECT_EQ(kept.count(CommKind::kAllGather), 0);
  // One re-gather, shared by both uses and by the gather's own record.
  EXPECT_EQ(recomputed.count(CommKind::kAllGather), 1);
  EXPECT_EQ(recomputed.count(CommKind::kReduceScatter),
            kept.count(CommKind::kReduceScatter));
  EXPECT_EQ(recomputed.total_collectives(), kept.total_collectives() + 1);
}

TEST(RecomputeTest, ANoOpWithoutTapeAndErrorsNameTheSpecs) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const DTensor w = Meta(runtime, mesh, {32, 16}, Placement::Shard(0));
  const DTensor other = Meta(runtime, mesh, {16, 16}, Placement::Replicate());
  EXPECT_FALSE(GradientTape::RecomputeInBackward(other, w).ok());
  GradientTape tape;
  GradientTape::Scope scope(tape);
  absl::Status status = GradientTape::RecomputeInBackward(other, w);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("[16, 16]"), std::string::npos) << status;
  EXPECT_EQ(GradientTape::RecomputeInBackward(DTensor(), w).code(),
            absl::StatusCode::kInvalidArgument);
  // The source itself: nothing to release.
  EXPECT_TRUE(GradientTape::RecomputeInBackward(w, w).ok());
  const DTensor g = *w.Redistribute({Placement::Replicate()});
  EXPECT_TRUE(GradientTape::RecomputeInBackward(g, w).ok());
  tape.Clear();
  EXPECT_EQ(tape.num_records(), 0u);
}

}  // namespace
}  // namespace nn
}  // namespace dtensor
