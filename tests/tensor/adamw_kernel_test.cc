// AdamWStep (dtensor/tensor/adamw_kernel.h), the fused one-pass AdamW, against
// the unfused formula of torch.optim.AdamW in double, operation by operation
// (tests/tensor/reference_adamw.h), over several steps from random states: f64
// to 1e-12 relative, f32 within a few float roundings (relative to the terms
// each result sums), bf16 and f16 within one rounding of their storage per step
// (the fused kernel rounds once where the formula, run in bf16 ops, would round
// after each operation); a strided parameter and gradient; and the argument
// errors.
#include "dtensor/tensor/adamw_kernel.h"

#include <random>

#include "absl/strings/match.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/reference_adamw.h"

namespace dtensor {
namespace {

using testing::AdamWState;
using testing::AdamWStateOf;
using testing::ExpectNearScaled;
using testing::Layout;
using testing::RandomTensor;
using testing::ReferenceAdamWStep;

TEST(AdamWKernelTest, EqualsTheUnfusedFormulaOverSteps) {
  std::mt19937 rng(11);
  struct Case {
    DType dtype;
    double rtol;  // Per step, of p, m and v.
    double atol;  // The dtype's smallest step (f16's subnormals).
  };
  for (const Case c :
       {Case{DType::kF64, 1e-12, 0}, Case{DType::kF32, 2e-6, 0},
        Case{DType::kBF16, 1.0 / 128, 0}, Case{DType::kF16, 1e-3, 0x1p-24}}) {
    for (Layout layout : {Layout::kContiguous, Layout::kTransposed}) {
      SCOPED_TRACE(DTypeName(c.dtype));
      const Shape shape = {7, 33};
      // Transposed: a strided parameter (a shard's view) and gradient.
      Tensor p = RandomTensor(shape, c.dtype, layout, rng);
      Tensor m = *Tensor::Zeros(shape, c.dtype);
      Tensor v = *Tensor::Zeros(shape, c.dtype);
      AdamWState s = AdamWStateOf(p, m, v);
      const AdamWOptions args{3e-3, 0.9, 0.95, 1e-5, 0.1};
      for (int64_t step = 1; step <= 4; ++step) {
        const Tensor g = RandomTensor(shape, c.dtype, layout, rng, -2, 2);
        ASSERT_TRUE(AdamWStep(p, m, v, g, args, step).ok());
        AdamWState scale;
        ReferenceAdamWStep(s, scale, g.ToVector<double>().value(), args, step);
        ExpectNearScaled(m, s.m, scale.m, c.rtol, c.atol, "exp_avg");
        ExpectNearScaled(v, s.v, scale.v, c.rtol, c.atol, "exp_avg_sq");
        ExpectNearScaled(p, s.p, scale.p, c.rtol, c.atol, "param");
        // The next step starts from what the kernel stored.
        s = AdamWStateOf(p, m, v);
      }
    }
  }
}

TEST(AdamWKernelTest, ErrorsNameTheArgument) {
  const Tensor p = *Tensor::Zeros({4, 3}, DType::kF32);
  const Tensor m = *Tensor::Zeros({4, 3}, DType::kF32);
  const Tensor v = *Tensor::Zeros({4, 3}, DType::kF32);
  const Tensor g = *Tensor::Zeros({4, 3}, DType::kF32);
  const AdamWOptions args{1e-3, 0.9, 0.999, 1e-8, 0};
  struct Case {
    absl::Status status;
    const char* needle;
  };
  const Case cases[] = {
      {AdamWStep(p, m, v, *Tensor::Zeros({3, 4}, DType::kF32), args, 1),
       "grad has shape [3, 4]"},
      {AdamWStep(p, m, v, *Tensor::Zeros({4, 3}, DType::kF64), args, 1),
       "grad"},
      {AdamWStep(p, m, m, g, args, 1), "distinct"},
      {AdamWStep(*Tensor::Zeros({4, 3}, DType::kI32), m, v, g, args, 1),
       "param"},
      {AdamWStep(p, m, v, g, args, 0), "step 0"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.needle;
    EXPECT_TRUE(absl::StrContains(c.status.message(), c.needle))
        << c.status.message();
  }
}

}  // namespace
}  // namespace dtensor
