// EmbeddingBackward on a CUDA device (the sorted, segmented sum of
// dtensor/tensor/cuda/index_kernels.h) against a float64 brute-force
// reference and, bit for bit, the CPU kernel: repeated indices, one index for
// every token, an empty batch, a shard of the rows, rows wider than a block;
// the same bits on every run; bad indices reported by the deferred check
// (GPU).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::Layout;
using testing::OnGpu;
using testing::RandomTensor;

// Relative spacing of `dtype` (one rounding of the result).
double Epsilon(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kF64:
      return std::ldexp(1.0, -53);
    default:
      return std::ldexp(1.0, -24);
  }
}

// Checks the device's gradient of rows [first_row, first_row + num_rows)
// against the float64 sums (each within one rounding to the dtype plus the
// float accumulation's error) and the CPU kernel bit for bit.
void CheckCase(const std::vector<int64_t>& index_values, int64_t width,
               int64_t table_rows, int64_t first_row, int64_t num_rows,
               DType dtype, std::mt19937& rng, const std::string& what) {
  const int64_t count = static_cast<int64_t>(index_values.size());
  const Tensor indices =
      *Tensor::FromVector<int64_t>(index_values, Shape{count});
  const Tensor grad =
      RandomTensor({count, width}, dtype, Layout::kContiguous, rng, -3, 3);
  const absl::StatusOr<Tensor> device = EmbeddingBackward(
      OnGpu(indices), OnGpu(grad), table_rows, first_row, num_rows);
  ASSERT_TRUE(device.ok()) << what << ": " << device.status();
  ASSERT_TRUE(device->device().is_cuda()) << what;
  ASSERT_EQ(device->dtype(), dtype) << what;
  ASSERT_EQ(device->shape(), (Shape{num_rows, width})) << what;
  const std::vector<double> got =
      *device->To(Device::CPU())->To(DType::kF64)->ToVector<double>();
  const std::vector<double> g = *grad.To(DType::kF64)->ToVector<double>();
  std::vector<double> sum(num_rows * width, 0.0);
  std::vector<double> magnitude(num_rows * width, 0.0);
  std::vector<int64_t> terms(num_rows, 0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = index_values[i] - first_row;
    if (row < 0 || row >= num_rows) continue;
    ++terms[row];
    for (int64_t j = 0; j < width; ++j) {
      sum[row * width + j] += g[i * width + j];
      magnitude[row * width + j] += std::fabs(g[i * width + j]);
    }
  }
  const double accumulate =
      dtype == DType::kF64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23);
  for (int64_t e = 0; e < num_rows * width; ++e) {
    const double bound = Epsilon(dtype) * std::fabs(sum[e]) +
                         terms[e / width] * accumulate * magnitude[e];
    ASSERT_LE(std::fabs(got[e] - sum[e]), bound)
        << what << " " << DTypeName(dtype) << " element " << e << ": " << got[e]
        << " vs " << sum[e];
  }
  const Tensor cpu =
      *EmbeddingBackward(indices, grad, table_rows, first_row, num_rows);
  EXPECT_EQ(got, *cpu.To(DType::kF64)->ToVector<double>())
      << what << " " << DTypeName(dtype) << ": not the CPU's bits";
  ASSERT_TRUE(ReadDeferredIndexChecks().ok()) << what;
}

std::vector<int64_t> RandomValues(int64_t count, int64_t low, int64_t high,
                                  std::mt19937& rng) {
  std::vector<int64_t> values(count);
  for (int64_t& v : values) {
    v = std::uniform_int_distribution<int64_t>(low, high)(rng);
  }
  return values;
}

TEST(EmbeddingBackwardCudaTest, MatchesTheFloat64SumsAndTheCpuBits) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (const DType dtype :
       {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
    // 300 tokens over 50 rows: each row named about 6 times.
    CheckCase(RandomValues(300, 0, 49, rng), 24, 50, 0, 50, dtype, rng,
              "repeated");
    CheckCase(std::vector<int64_t>(500, 17), 40, 50, 0, 50, dtype, rng,
              "all one index");
    CheckCase({}, 24, 50, 0, 50, dtype, rng, "empty batch");
    CheckCase(RandomValues(200, 0, 49, rng), 24, 50, 10, 30, dtype, rng,
              "rows [10, 40)");
    // Rows wider than a block (256 threads) and most rows untouched.
    CheckCase(RandomValues(2000, 0, 4999, rng), 600, 5000, 0, 5000, dtype, rng,
              "wide, sparse");
  }
}

TEST(EmbeddingBackwardCudaTest, GivesTheSameBitsEveryRun) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  const std::vector<int64_t> values = RandomValues(4096, 0, 7, rng);
  const Tensor indices = OnGpu(*Tensor::FromVector<int64_t>(values, {4096}));
  const Tensor grad = OnGpu(
      RandomTensor({4096, 256}, DType::kBF16, Layout::kContiguous, rng, -3, 3));
  const std::vector<float> first =
      *EmbeddingBackward(indices, grad, 8)->To(DType::kF32)->ToVector<float>();
  for (int run = 0; run < 5; ++run) {
    EXPECT_EQ(*EmbeddingBackward(indices, grad, 8)
                   ->To(DType::kF32)
                   ->ToVector<float>(),
              first)
        << "run " << run;
  }
}

TEST(EmbeddingBackwardCudaTest, ReportsTheFirstBadIndexDeferred) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  const Tensor indices =
      OnGpu(*Tensor::FromVector<int64_t>({3, 60, -1, 2}, {4}));
  const Tensor grad =
      OnGpu(RandomTensor({4, 8}, DType::kF32, Layout::kContiguous, rng));
  const absl::StatusOr<Tensor> out = EmbeddingBackward(indices, grad, 50);
  ASSERT_TRUE(out.ok()) << out.status();
  const absl::Status read = ReadDeferredIndexChecks();
  EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument) << read;
  EXPECT_NE(std::string(read.message()).find("index 60"), std::string::npos)
      << read;
  EXPECT_TRUE(ReadDeferredIndexChecks().ok());
}

}  // namespace
}  // namespace dtensor
