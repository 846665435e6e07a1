// A tensor larger than the device fails with ResourceExhausted naming the
// tensor, the bytes asked and the bytes free (cudaMemGetInfo), without an
// abort, and the device works on afterwards (GPU; skips without one).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(CudaOutOfMemoryTest, ATensorLargerThanTheDeviceFailsWithItsBytes) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  // 4 TiB of f32: more than any device's memory.
  const int64_t elements = int64_t{1} << 40;
  absl::StatusOr<Tensor> huge =
      Tensor::Empty({elements}, DType::kF32, Device::CUDA(0));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted)
      << huge.status();
  const std::string message(huge.status().message());
  EXPECT_TRUE(absl::StrContains(message, "f32[1099511627776] tensor"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "cuda:0")) << message;
  EXPECT_TRUE(absl::StrContains(message,
                                "asked for 4.00 TiB (4398046511104 "
                                "bytes)"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, " free of ")) << message;
  EXPECT_FALSE(absl::StrContains(message, "free of 0 bytes")) << message;

  // The failed cudaMalloc leaves no error behind: the next tensor works.
  absl::StatusOr<Tensor> small =
      Tensor::Full({1024}, 2.5, DType::kF32, Device::CUDA(0));
  ASSERT_TRUE(small.ok()) << small.status();
  absl::StatusOr<Tensor> host = small->To(Device::CPU());
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<std::vector<float>> values = host->ToVector<float>();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, std::vector<float>(1024, 2.5f));
}

}  // namespace
}  // namespace dtensor
