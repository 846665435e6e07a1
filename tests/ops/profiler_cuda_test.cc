// The profiler's device path: ops whose shards live on a CUDA device get
// their time from CUDA events on the device's stream, read at Resolve; copies
// between host and device count as host syncs. Needs a GPU (tag `gpu`);
// skips with a message otherwise.
#include <chrono>
#include <iostream>
#include <memory>
#include <vector>

#include "dtensor/base/profile_summary.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/cuda_backend.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr int64_t kN = 1024;
constexpr int kCalls = 8;

TEST(ProfilerCudaTest, DeviceOpsGetEventTimesAndCopiesCountAsHostSyncs) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  const Device gpu = Device::CUDA(0);
  absl::StatusOr<DeviceMesh> mesh = DeviceMesh::Create({1});
  ASSERT_TRUE(mesh.ok());
  Profiler profiler(0);
  // Host clock from before the first launch to after the stream drained: no
  // op's device time can exceed it, nor their sum.
  double host_us = 0;
  LocalCluster cluster(1, CommunicatorOptions(), gpu);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor full,
                            Tensor::Full({kN, kN}, 0.5, DType::kF32, gpu));
        DT_ASSIGN_OR_RETURN(
            DTensor a, DTensor::Distribute(runtime, full, *mesh,
                                           {Placement::Replicate()}));
        DT_RETURN_IF_ERROR(cuda::Synchronize(0));
        Profiler::Scope scope(profiler);
        Profiler::StepScope step(profiler);
        const auto start = std::chrono::steady_clock::now();
        DTensor x = a;
        for (int i = 0; i < kCalls; ++i) {
          DT_ASSIGN_OR_RETURN(x, ops::Mm(x, a));
        }
        DT_RETURN_IF_ERROR(cuda::Synchronize(0));
        host_us = std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - start)
                      .count();
        // One copy each way: two host syncs.
        DT_ASSIGN_OR_RETURN(Tensor host, x.ToLocal().To(Device::CPU()));
        DT_ASSIGN_OR_RETURN(Tensor back, host.To(gpu));
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_TRUE(profiler.Resolve().ok());
  double device_sum = 0;
  int mm_calls = 0;
  for (const Profiler::Record& record : profiler.records()) {
    if (record.name != "mm") continue;
    ++mm_calls;
    EXPECT_EQ(record.device, nullptr);  // Resolve read and dropped it.
    EXPECT_GT(record.device_us, 0);
    EXPECT_LE(record.device_us, host_us);
    EXPECT_EQ(record.flops, 2.0 * kN * kN * kN);
    device_sum += record.device_us;
  }
  EXPECT_EQ(mm_calls, kCalls);
  EXPECT_LE(device_sum, host_us);
  ASSERT_EQ(profiler.steps().size(), 1u);
  EXPECT_EQ(profiler.steps()[0].host_syncs, 2);
  const ProfileSummary summary = Summarize(profiler);
  ASSERT_FALSE(summary.rows.empty());
  EXPECT_EQ(summary.rows[0].name, "mm");
  EXPECT_TRUE(summary.rows[0].device_time);
  std::cout << FormatProfileTable(summary);
}

}  // namespace
}  // namespace dtensor
