// CudaGraph on a GPU (tag `gpu`; skips without a device): a replay reruns
// the captured kernels on the data then in the captured input and rewrites
// the captured output in place; an upload or a host read inside the body
// fails the capture with FailedPrecondition and the stream stays usable; the
// body's own error is returned; the body's memory stays private to the graph
// until it is destroyed.
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/cuda_graph.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using ::dtensor::testing::kGpu;

Tensor Values(const std::vector<float>& values) {
  absl::StatusOr<Tensor> t =
      Tensor::FromVector(values, {static_cast<int64_t>(values.size())});
  EXPECT_TRUE(t.ok()) << t.status();
  return testing::OnGpu(*t);
}

// 2 x + 1 + exp(x), computed on the host in double.
std::vector<float> Reference(const std::vector<float>& x) {
  std::vector<float> out;
  for (float v : x) {
    out.push_back(static_cast<float>(2.0 * v + 1.0 + std::exp(double{v})));
  }
  return out;
}

void ExpectNear(const Tensor& t, const std::vector<float>& expected) {
  absl::StatusOr<std::vector<float>> got = t.ToVector<float>();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR((*got)[i], expected[i], 1e-5 * std::abs(expected[i]) + 1e-6)
        << "element " << i;
  }
}

TEST(CudaGraphGpuTest, ReplayRecomputesFromTheCapturedInput) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const std::vector<float> first = {0.5f, -1.0f, 2.0f, 0.0f};
  Tensor x = Values(first);
  Tensor y;
  std::set<const void*> graph_memory;  // The body's buffers, freed or not.
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
      CudaGraph::Capture(kGpu, [&]() -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor twice, Mul(x, 2.0));
        DT_ASSIGN_OR_RETURN(Tensor shifted, Add(twice, 1.0));
        DT_ASSIGN_OR_RETURN(Tensor e, Exp(x));
        DT_ASSIGN_OR_RETURN(y, Add(shifted, e));
        graph_memory = {twice.raw_data(), shifted.raw_data(), e.raw_data(),
                        y.raw_data()};
        return absl::OkStatus();
      });
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE((*graph)->Replay().ok());
  ExpectNear(y, Reference(first));
  const void* y_address = y.raw_data();
  for (const std::vector<float>& next :
       {std::vector<float>{1.0f, 2.0f, 3.0f, -4.0f},
        std::vector<float>{-0.25f, 0.75f, 1.5f, 0.125f}}) {
    ASSERT_TRUE(x.CopyFrom(Values(next)).ok());  // On the device.
    ASSERT_TRUE((*graph)->Replay().ok());
    ExpectNear(y, Reference(next));
    EXPECT_EQ(y.raw_data(), y_address);
  }
  // Tensors made after the capture never get the graph's memory, not even
  // the intermediates it freed (the replays write them).
  std::vector<Tensor> others;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Tensor> t = Tensor::Zeros({4}, DType::kF32, kGpu);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(graph_memory.count(t->raw_data()), 0u) << i;
    others.push_back(*t);
  }
  const Tensor* other = &others.front();
  ASSERT_TRUE(x.CopyFrom(Values(first)).ok());
  ASSERT_TRUE((*graph)->Replay().ok());
  ExpectNear(y, Reference(first));
  ExpectNear(*other, {0, 0, 0, 0});
}

TEST(CudaGraphGpuTest, UploadsAndHostReadsInsideTheBodyFail) {
  DTENSOR_SKIP_WITHOUT_GPU();
  Tensor x = Values({1.0f, 2.0f});
  absl::StatusOr<Tensor> host = Tensor::FromVector<float>({3.0f, 4.0f}, {2});
  ASSERT_TRUE(host.ok());
  absl::StatusOr<std::unique_ptr<CudaGraph>> upload =
      CudaGraph::Capture(kGpu, [&]() -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor doubled, Mul(x, 2.0));
        return doubled.CopyFrom(*host);
      });
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(upload.status().message().find("host-to-device copy"),
            std::string::npos)
      << upload.status();
  absl::StatusOr<std::unique_ptr<CudaGraph>> read = CudaGraph::Capture(
      kGpu, [&]() -> absl::Status { return x.ToVector<float>().status(); });
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(read.status().message().find("captured into a CUDA graph"),
            std::string::npos)
      << read.status();
  // The stream is usable: eager work runs and reads back.
  absl::StatusOr<Tensor> tripled = Mul(x, 3.0);
  ASSERT_TRUE(tripled.ok()) << tripled.status();
  ExpectNear(*tripled, {3.0f, 6.0f});
  EXPECT_TRUE(cuda::Synchronize(kGpu.index).ok());
}

TEST(CudaGraphGpuTest, TheBodysErrorIsReturned) {
  DTENSOR_SKIP_WITHOUT_GPU();
  Tensor x = Values({1.0f});
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
      CudaGraph::Capture(kGpu, [&]() -> absl::Status {
        DT_RETURN_IF_ERROR(Mul(x, 2.0).status());
        return absl::InvalidArgumentError("the body's own error");
      });
  EXPECT_EQ(graph.status(), absl::InvalidArgumentError("the body's own error"));
  absl::StatusOr<Tensor> again = Add(x, 1.0);
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectNear(*again, {2.0f});
}

// A deferred index check captured in the graph reports each replay's indices
// at the next read, under the contract of index_checks.h; eager checks made
// between replays keep their own slots; two replays before a read report the
// latest's indices once. The graph makes this thread's first check: its
// pinned slots and device words are made before the capture (PrepareCapture).
TEST(CudaGraphGpuTest, CapturedIndexChecksReportEachReplay) {
  DTENSOR_SKIP_WITHOUT_GPU();
  absl::StatusOr<Tensor> good = Tensor::FromVector<int64_t>({0, 4, 2}, {3});
  absl::StatusOr<Tensor> bad = Tensor::FromVector<int64_t>({1, 9, 7}, {3});
  ASSERT_TRUE(good.ok() && bad.ok());
  Tensor indices = testing::OnGpu(*good);
  const Tensor bad_on_gpu = testing::OnGpu(*bad);
  const Tensor good_on_gpu = testing::OnGpu(*good);
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph = CudaGraph::Capture(
      kGpu, [&] { return CheckIndicesInRange(indices, 5, "captured"); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(indices.CopyFrom(bad_on_gpu).ok());
  ASSERT_TRUE((*graph)->Replay().ok());
  // An eager check between the replay and the read: its own slot.
  ASSERT_TRUE(CheckIndicesInRange(good_on_gpu, 5, "eager").ok());
  EXPECT_EQ(
      ReadDeferredIndexChecks(),
      absl::InvalidArgumentError("captured: index 9 is out of range [0, 5)"));
  ASSERT_TRUE(indices.CopyFrom(good_on_gpu).ok());
  ASSERT_TRUE((*graph)->Replay().ok());
  ASSERT_TRUE(CheckIndicesInRange(bad_on_gpu, 5, "eager").ok());
  EXPECT_EQ(
      ReadDeferredIndexChecks(),
      absl::InvalidArgumentError("eager: index 9 is out of range [0, 5)"));
  // A bad replay, then a good one before the read: the latest's reports.
  ASSERT_TRUE(indices.CopyFrom(bad_on_gpu).ok());
  ASSERT_TRUE((*graph)->Replay().ok());
  ASSERT_TRUE(indices.CopyFrom(good_on_gpu).ok());
  ASSERT_TRUE((*graph)->Replay().ok());
  EXPECT_TRUE(ReadDeferredIndexChecks().ok());
  // And a good one, then a bad one: the bad one's.
  ASSERT_TRUE((*graph)->Replay().ok());
  ASSERT_TRUE(indices.CopyFrom(bad_on_gpu).ok());
  ASSERT_TRUE((*graph)->Replay().ok());
  EXPECT_EQ(
      ReadDeferredIndexChecks(),
      absl::InvalidArgumentError("captured: index 9 is out of range [0, 5)"));
}

}  // namespace
}  // namespace dtensor
