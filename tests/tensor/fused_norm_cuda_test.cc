// AddRmsNorm and AddRmsNormBackward (the fused residual add + RMSNorm) on a
// CUDA device against the reference of add-then-RMSNorm in double, on random
// shapes (rows that are whole 16-byte packs and rows that are not), dtypes,
// eps and layouts, with and without weight. Needs a GPU (tag `gpu`); skips
// with a message otherwise.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/fused_norm.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/fused_norm_reference.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::Layout;
using testing::OnGpu;
using testing::Pick;
using testing::RandomTensor;
using testing::Scaled;
using testing::Values;

// `device` is on the GPU and within the tolerance of `expected`.
void ExpectCloseOnGpu(const Tensor& device, const Shape& shape,
                      const std::vector<double>& expected, DType dtype,
                      double scale, const std::string& what) {
  ASSERT_TRUE(device.defined()) << what;
  ASSERT_TRUE(device.device().is_cuda()) << what;
  testing::ExpectClose(*device.To(Device::CPU()), shape, expected,
                       Scaled(dtype, scale), what);
}

TEST(FusedNormCudaTest, MatchesTheReferenceInDouble) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  std::mt19937 rng(12);
  for (int trial = 0; trial < 48; ++trial) {
    const int64_t rows = Pick<int64_t>({1, 3, 64, 65, 300}, rng);
    const int64_t width = Pick<int64_t>({1, 7, 8, 256, 300, 2048, 2050}, rng);
    const DType dtype = Pick(testing::kFloatDTypes, rng);
    const double eps = Pick<double>({1e-6, 1e-5, 0.1}, rng);
    const Layout layout =
        trial % 3 == 0 ? Layout::kTransposed : Layout::kContiguous;
    const Shape shape = {rows, width};
    const Tensor residual = RandomTensor(shape, dtype, layout, rng, -2, 2);
    const Tensor delta =
        RandomTensor(shape, dtype, Layout::kContiguous, rng, -1, 1);
    const Tensor weight =
        trial % 4 == 0
            ? Tensor()
            : RandomTensor({width}, dtype, Layout::kContiguous, rng, 0.5, 1.5);
    const Tensor g = RandomTensor(shape, dtype, Layout::kContiguous, rng);
    const Tensor grad_sum =
        trial % 5 == 0 ? Tensor()
                       : RandomTensor(shape, dtype, Layout::kContiguous, rng);
    const std::string what =
        absl::StrCat("trial ", trial, " [", rows, ", ", width, "] ",
                     std::string(DTypeName(dtype)), " eps ", eps,
                     weight.defined() ? " weight" : "");
    const absl::StatusOr<AddRmsNormOutputs> out =
        AddRmsNorm(OnGpu(residual), OnGpu(delta), OnGpu(weight), eps);
    ASSERT_TRUE(out.ok()) << what << ": " << out.status();
    const testing::Reference ref = testing::ReferenceForward(
        Values(residual), Values(delta), Values(weight), width, eps);
    ExpectCloseOnGpu(out->sum, shape, ref.sum, dtype, 2, what + " sum");
    ExpectCloseOnGpu(out->normed, shape, ref.normed, dtype, 4,
                     what + " normed");

    const absl::StatusOr<NormGrads> grads = AddRmsNormBackward(
        out->sum, OnGpu(weight), OnGpu(g), OnGpu(grad_sum), eps);
    ASSERT_TRUE(grads.ok()) << what << ": " << grads.status();
    const testing::ReferenceGrads ref_grads =
        testing::ReferenceBackward(Values(out->sum), Values(weight), Values(g),
                                   Values(grad_sum), width, eps);
    ExpectCloseOnGpu(grads->dx, shape, ref_grads.dx, dtype, 8, what + " dx");
    ASSERT_EQ(grads->dweight.defined(), weight.defined()) << what;
    if (weight.defined()) {
      ExpectCloseOnGpu(grads->dweight, {width}, ref_grads.dweight, dtype,
                       8 * std::sqrt(static_cast<double>(rows)),
                       what + " dweight");
    }
  }
}

}  // namespace
}  // namespace dtensor
