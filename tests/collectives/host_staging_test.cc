// In-process ranks whose tensors live on one GPU: LocalCluster with a CUDA
// device stages every call through the host
// (dtensor/collectives/host_staging.h). Runs the backend-neutral scenarios
// (every collective against references from every rank's inputs) on 4 ranks.
// Needs a GPU; skips with a message otherwise.
#include "dtensor/collectives/host_staging.h"

#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_scenarios.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::OnGpu;
LocalCluster OnGpu(int64_t ranks) {
  return LocalCluster(ranks, testing::TestOptions(), Device::CUDA(0));
}

TEST(HostStagingTest, EveryCollectiveOnCudaTensors) {
  DTENSOR_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(OnGpu(4).Run(testing::Collectives).ok());
  EXPECT_TRUE(OnGpu(3).Run(testing::Collectives).ok());
}

TEST(HostStagingTest, SubgroupsOnCudaTensors) {
  DTENSOR_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(OnGpu(4).Run(testing::Subgroups).ok());
}

TEST(HostStagingTest, CpuTensorsAreRejectedNamingTheDevice) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const absl::Status status = OnGpu(2).Run([](ProcessGroups& groups) {
    absl::StatusOr<std::shared_ptr<Communicator>> world = groups.World();
    if (!world.ok()) return world.status();
    EXPECT_EQ((*world)->device(), Device::CUDA(0));
    const Tensor on_cpu = *Tensor::Ones({4}, DType::kF32);
    return (*world)->AllReduce(on_cpu, ReduceOp::kSum);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("cuda"), std::string::npos) << status;
}

}  // namespace
}  // namespace dtensor
