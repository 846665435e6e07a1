#include "dtensor/tensor/cuda_backend.h"

#include <cstdint>
#include <vector>

#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

// Skips the calling test unless a CUDA device can be used.
TEST(CudaBackendTest, ReportsWhyItIsUnavailable) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  absl::StatusOr<void*> ptr = Malloc(16, 0);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kFailedPrecondition);
  if (BuiltWithCuda()) {
    EXPECT_NE(ptr.status().message().find("no CUDA device"), std::string::npos);
  } else {
    EXPECT_NE(ptr.status().message().find("built without CUDA"),
              std::string::npos);
  }
}

TEST(CudaBackendTest, FillAndCopyRoundTrip) {
  DTENSOR_SKIP_WITHOUT_GPU();
  constexpr size_t kCount = 1 << 20;
  absl::StatusOr<void*> device_buffer = Malloc(kCount * 4, 0);
  ASSERT_TRUE(device_buffer.ok()) << device_buffer.status();
  ASSERT_TRUE(Fill(*device_buffer, kCount, 0xdeadbeefu, 4, 0).ok());
  std::vector<uint32_t> host(kCount, 0);
  ASSERT_TRUE(Memcpy(host.data(), *device_buffer, kCount * 4,
                     CopyKind::kDeviceToHost, 0)
                  .ok());
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(host[i], 0xdeadbeefu) << i;
  // Host -> device -> host keeps arbitrary bytes.
  for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<uint32_t>(i * 7);
  ASSERT_TRUE(Memcpy(*device_buffer, host.data(), kCount * 4,
                     CopyKind::kHostToDevice, 0)
                  .ok());
  std::vector<uint32_t> back(kCount, 0);
  ASSERT_TRUE(Memcpy(back.data(), *device_buffer, kCount * 4,
                     CopyKind::kDeviceToHost, 0)
                  .ok());
  EXPECT_EQ(back, host);
  Free(*device_buffer, 0);
}

TEST(CudaBackendTest, RejectsMissingDevice) {
  DTENSOR_SKIP_WITHOUT_GPU();
  absl::StatusOr<void*> ptr = Malloc(16, DeviceCount());
  ASSERT_FALSE(ptr.ok());
  EXPECT_NE(ptr.status().message().find(std::to_string(DeviceCount())),
            std::string::npos);
}

}  // namespace
}  // namespace dtensor::cuda
