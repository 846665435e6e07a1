// RmsNormBackward and LayerNormBackward on a CUDA device against the CPU
// kernel, on random shapes (rows beyond one chunk of the parameter gradients'
// sums included), dtypes and layouts. Needs a GPU (tag `gpu`); skips with a
// message otherwise.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::kGpu;
using testing::Layout;
using testing::OnGpu;
using testing::RandomTensor;

// `device` (on the GPU) within `scale` times the dtype's tolerance of `cpu`;
// both undefined is a match.
void ExpectMatches(const Tensor& device, const Tensor& cpu,
                   const std::string& what, double scale) {
  ASSERT_EQ(device.defined(), cpu.defined()) << what;
  if (!cpu.defined()) return;
  ASSERT_TRUE(device.device().is_cuda()) << what;
  ASSERT_EQ(device.dtype(), cpu.dtype()) << what;
  const Tensor back = *device.To(Device::CPU());
  ASSERT_EQ(back.shape(), cpu.shape()) << what;
  const testing::Tolerance t = testing::ToleranceFor(cpu.dtype());
  EXPECT_TRUE(AllClose(*back.To(DType::kF64), *cpu.To(DType::kF64),
                       scale * t.rtol, scale * t.atol))
      << what << "\n device: " << back << "\n cpu: " << cpu;
}

TEST(NormBackwardCudaTest, MatchesTheCpuKernel) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  std::mt19937 rng(11);
  const std::vector<Layout> layouts = {Layout::kContiguous, Layout::kTransposed,
                                       Layout::kStrided};
  for (int trial = 0; trial < 48; ++trial) {
    const int64_t rows = testing::Pick<int64_t>({0, 1, 3, 64, 65, 300}, rng);
    const int64_t width = testing::Pick<int64_t>({1, 7, 256, 300, 1000}, rng);
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const bool layer_norm = trial % 2 == 0;
    const Layout layout = testing::Pick(layouts, rng);
    const Tensor x = RandomTensor({rows, width}, dtype, layout, rng, -2, 3);
    const Tensor g =
        RandomTensor({rows, width}, dtype, Layout::kContiguous, rng);
    const Tensor w =
        trial % 3 == 0
            ? Tensor()
            : RandomTensor({width}, dtype, Layout::kContiguous, rng, 0.5, 1.5);
    const Tensor b =
        layer_norm && trial % 4 != 0
            ? RandomTensor({width}, dtype, Layout::kContiguous, rng)
            : Tensor();
    const std::string what = absl::StrCat(
        "trial ", trial, layer_norm ? " layer_norm [" : " rms_norm [", rows,
        ", ", width, "] ", std::string(DTypeName(dtype)), " ",
        testing::LayoutName(layout), w.defined() ? " weight" : "",
        b.defined() ? " bias" : "");
    const absl::StatusOr<NormGrads> cpu =
        layer_norm ? LayerNormBackward(x, w, b, g, 1e-5)
                   : RmsNormBackward(x, w, g, 1e-5);
    const absl::StatusOr<NormGrads> device =
        layer_norm
            ? LayerNormBackward(OnGpu(x), OnGpu(w), OnGpu(b), OnGpu(g), 1e-5)
            : RmsNormBackward(OnGpu(x), OnGpu(w), OnGpu(g), 1e-5);
    ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
    ASSERT_TRUE(device.ok()) << what << ": " << device.status();
    ExpectMatches(device->dx, cpu->dx, what + " dx", 4);
    // Sums over up to 300 rows in another order.
    ExpectMatches(device->dweight, cpu->dweight, what + " dweight", 16);
    ExpectMatches(device->dbias, cpu->dbias, what + " dbias", 16);
  }
}

TEST(NormBackwardCudaTest, OperandsOnAnotherDeviceAreErrors) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  const Tensor x = *Tensor::Ones({2, 4}, DType::kF32, kGpu);
  const Tensor g_cpu = *Tensor::Ones({2, 4}, DType::kF32);
  const absl::StatusOr<NormGrads> mixed = RmsNormBackward(x, Tensor(), g_cpu);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("grad_out"), std::string::npos)
      << mixed.status();
}

}  // namespace
}  // namespace dtensor
