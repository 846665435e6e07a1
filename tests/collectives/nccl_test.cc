// The NCCL backend with real processes, one per CUDA device (at most four),
// through collective_worker. Without a device (or without --config=cuda)
// the tests skip with a message, and the backend must say why it cannot
// run.
#include <algorithm>

#include "absl/strings/match.h"
#include "dtensor/collectives/nccl/nccl_backend.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/collectives/worker_launch.h"

namespace dtensor {
namespace {

using testing::AllSucceeded;
using testing::RunWorkers;
using testing::WorkerLaunch;

// One rank per device; NCCL does not put two ranks on one device.
int64_t Ranks() { return std::min(cuda::DeviceCount(), 4); }

WorkerLaunch Nccl(const std::string& scenario) {
  WorkerLaunch launch;
  launch.backend = "nccl";
  launch.scenario = scenario;
  launch.nproc = Ranks();
  return launch;
}

TEST(NcclTest, ReportsWhyItIsUnavailable) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  NcclBackendOptions options;
  options.host_store = true;
  const absl::Status status = NcclBackend::Create(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), cuda::BuiltWithCuda()
                                                      ? "needs a CUDA device"
                                                      : "built without CUDA"))
      << status;
}

TEST(NcclTest, EveryOpMatchesItsReference) {
  DTENSOR_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(AllSucceeded(RunWorkers(Nccl("collectives")), Ranks()));
}

TEST(NcclTest, SubgroupsRunTheSameOps) {
  DTENSOR_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(AllSucceeded(RunWorkers(Nccl("subgroups")), Ranks()));
}

}  // namespace
}  // namespace dtensor
