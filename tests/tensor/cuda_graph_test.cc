// CudaGraph's errors that need no device: a CPU device, and (in a build
// without CUDA) any device; the body never runs then. CapturedIndexChecks'
// one-per-thread rule. The replays' results are checked on a GPU by
// cuda_graph_gpu_test.
#include "dtensor/tensor/cuda_graph.h"

#include <string>

#include "absl/status/status.h"
#include "dtensor/base/profiler.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/index_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(CudaGraphTest, RefusesTheCpuWithoutRunningTheBody) {
  bool ran = false;
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
      CudaGraph::Capture(Device::CPU(), [&] {
        ran = true;
        return absl::OkStatus();
      });
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(graph.status().message().find("is not a CUDA device"),
            std::string::npos)
      << graph.status();
  EXPECT_FALSE(ran);
}

TEST(CudaGraphTest, RefusesCaptureUnderAProfilerScope) {
  if (cuda::DeviceCount() == 0) {
    // Without a device the backend's error comes first, the body unrun.
    bool ran = false;
    absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
        CudaGraph::Capture(Device::CUDA(0), [&] {
          ran = true;
          return absl::OkStatus();
        });
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_FALSE(ran);
  }
  Profiler profiler(0);
  Profiler::Scope scope(profiler);
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
      CudaGraph::Capture(Device::CUDA(0), [] { return absl::OkStatus(); });
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(graph.status().message().find("profiler scope is active"),
            std::string::npos)
      << graph.status();
}

// One graph's captured index checks per thread at a time; a new capture may
// prepare once the held ones are destroyed.
TEST(CapturedIndexChecksTest, OneCapturedSetPerThread) {
  ASSERT_TRUE(CapturedIndexChecks::PrepareCapture(Device::CPU()).ok());
  {
    const CapturedIndexChecks held = CapturedIndexChecks::TakeCaptured();
    held.Requeue();  // Nothing was captured: nothing is queued.
    EXPECT_TRUE(ReadDeferredIndexChecks().ok());
    const absl::Status again =
        CapturedIndexChecks::PrepareCapture(Device::CPU());
    EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(again.message().find("already"), std::string::npos) << again;
  }
  EXPECT_TRUE(CapturedIndexChecks::PrepareCapture(Device::CPU()).ok());
  const CapturedIndexChecks next = CapturedIndexChecks::TakeCaptured();
}

}  // namespace
}  // namespace dtensor
