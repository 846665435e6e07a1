// A device allocation that does not fit fails with a status naming the
// tensor, the bytes asked and the bytes free (tensor/cuda/out_of_memory.h),
// never an abort. The text is checked here on the CPU; cuda_out_of_memory_test
// checks a real failed cudaMalloc on a GPU.
#include "dtensor/tensor/cuda/out_of_memory.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

TEST(OutOfMemoryTest, BytesTextIsExactInBrackets) {
  EXPECT_EQ(BytesText(512), "512 bytes");
  EXPECT_EQ(BytesText(1536), "1.50 KiB (1536 bytes)");
  EXPECT_EQ(BytesText(size_t{3} << 30), "3.00 GiB (3221225472 bytes)");
  EXPECT_EQ(BytesText(size_t{1} << 40), "1.00 TiB (1099511627776 bytes)");
}

TEST(OutOfMemoryTest, NamesAskedFreeAndTotal) {
  const absl::Status status =
      OutOfDeviceMemory(size_t{1} << 40, size_t{5} << 29, size_t{80} << 30);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  const std::string message(status.message());
  EXPECT_TRUE(absl::StrContains(
      message,
      "asked for 1.00 TiB (1099511627776 bytes), 2.50 GiB "
      "(2684354560 bytes) free of 80.00 GiB (85899345920 bytes)"))
      << message;
}

}  // namespace
}  // namespace dtensor::cuda
