// AdamWStepMany (dtensor/tensor/adamw_kernel.h) on a CUDA device against the
// same step on the CPU (itself checked bitwise against AdamWStep and against
// the formula in double by adamw_many_test): more parameters than one
// launch's arguments hold (kMultiTensorMaxTensors), tensors of several
// chunks and one of more chunks than one launch's blocks
// (kMultiTensorMaxBlocks), empty, one-element and odd sizes, f32 and bf16
// with different steps (several groups), a strided entry (the per-parameter
// launch), over three steps; and a device mismatch naming the parameter.
// Needs a GPU (tag `gpu`); skips with a message otherwise.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/cuda/multi_tensor_body.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::kGpu;
using testing::Layout;
using testing::OnGpu;
using testing::RandomTensor;

const AdamWOptions kOptions{1e-2, 0.9, 0.999, 1e-8, 0.01};

// The sizes of the parameter set: 3 of more than one chunk, one of more
// chunks than a launch has blocks, and 44 small ones (48 > 36 tensors).
std::vector<int64_t> Sizes() {
  const int64_t chunk = cuda::kMultiTensorChunk;
  std::vector<int64_t> sizes = {
      3 * chunk + 17, 0, 1, 2 * chunk, cuda::kMultiTensorMaxBlocks * chunk + 5,
      chunk + 1};
  for (int i = 0; sizes.size() < 50; ++i) sizes.push_back(1 + 97 * i % 1000);
  return sizes;
}

// The CPU parameter set: f32 and bf16, steps 1 or 2 (four groups), entry 7
// transposed (strided).
std::vector<AdamWOperands> CpuEntries(std::mt19937& rng) {
  std::vector<AdamWOperands> entries;
  const std::vector<int64_t> sizes = Sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const DType dtype = i % 3 == 0 ? DType::kBF16 : DType::kF32;
    const Shape shape = i == 7 ? Shape{3, 5} : Shape{sizes[i]};
    const Layout layout = i == 7 ? Layout::kTransposed : Layout::kContiguous;
    AdamWOperands e;
    e.param = RandomTensor(shape, dtype, layout, rng);
    e.exp_avg = RandomTensor(shape, dtype, layout, rng, -0.1, 0.1);
    e.exp_avg_sq = RandomTensor(shape, dtype, layout, rng, 0, 0.01);
    e.step = 1 + static_cast<int64_t>(i % 2);
    entries.push_back(e);
  }
  return entries;
}

// `entries` on the GPU, in the same layouts.
std::vector<AdamWOperands> OnGpuAll(const std::vector<AdamWOperands>& entries) {
  std::vector<AdamWOperands> gpu;
  for (const AdamWOperands& e : entries) {
    gpu.push_back({OnGpu(e.param), OnGpu(e.exp_avg), OnGpu(e.exp_avg_sq),
                   e.grad.defined() ? OnGpu(e.grad) : Tensor(), e.step});
  }
  return gpu;
}

// The device result within a few roundings of the CPU one (the device may
// contract a * b + c into one rounding).
void ExpectMatches(const Tensor& gpu, const Tensor& cpu,
                   const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  const Tensor back = *gpu.To(Device::CPU());
  ASSERT_EQ(back.shape(), cpu.shape()) << what;
  const auto tolerance = testing::ToleranceFor(cpu.dtype());
  EXPECT_TRUE(AllClose(*back.To(DType::kF64), *cpu.To(DType::kF64),
                       4 * tolerance.rtol, 4 * tolerance.atol))
      << what;
}

TEST(AdamWManyCudaTest, MatchesTheCpuStepOverManyLaunches) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  std::vector<AdamWOperands> cpu = CpuEntries(rng);
  std::vector<AdamWOperands> gpu = OnGpuAll(cpu);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      cpu[i].grad = RandomTensor(cpu[i].param.shape(), cpu[i].param.dtype(),
                                 Layout::kContiguous, rng, -1, 1);
      gpu[i].grad = OnGpu(cpu[i].grad);
      cpu[i].step = gpu[i].step += 1;
    }
    ASSERT_TRUE(AdamWStepMany(gpu, kOptions).ok());
    ASSERT_TRUE(AdamWStepMany(cpu, kOptions).ok());
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    const std::string what = absl::StrCat(
        "parameter ", i, " ", std::string(DTypeName(cpu[i].param.dtype())), " ",
        ShapeToString(cpu[i].param.shape()));
    ExpectMatches(gpu[i].param, cpu[i].param, what + " param");
    ExpectMatches(gpu[i].exp_avg, cpu[i].exp_avg, what + " exp_avg");
    ExpectMatches(gpu[i].exp_avg_sq, cpu[i].exp_avg_sq, what + " exp_avg_sq");
  }
}

TEST(AdamWManyCudaTest, ADeviceMismatchNamesTheParameter) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::vector<AdamWOperands> entries(2);
  for (AdamWOperands& e : entries) {
    e.param = *Tensor::Zeros({4}, DType::kF32, kGpu);
    e.exp_avg = *Tensor::Zeros({4}, DType::kF32, kGpu);
    e.exp_avg_sq = *Tensor::Zeros({4}, DType::kF32, kGpu);
    e.grad = *Tensor::Ones({4}, DType::kF32, kGpu);
  }
  entries[1].grad = *Tensor::Ones({4}, DType::kF32);
  const absl::Status status = AdamWStepMany(entries, kOptions);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.message(), "parameter 1: ")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "grad")) << status;
  // Nothing was written.
  const Tensor p = *entries[0].param.To(Device::CPU());
  EXPECT_EQ(p.ToVector<double>().value(), std::vector<double>(4, 0.0));
}

}  // namespace
}  // namespace dtensor
