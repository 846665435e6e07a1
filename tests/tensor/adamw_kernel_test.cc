// AdamWStep (dtensor/tensor/adamw_kernel.h), the fused one-pass AdamW, against
// the unfused formula of torch.optim.AdamW written out here in double,
// operation by operation, over several steps from random states: f64 to 1e-12
// relative, f32 within a few float roundings (relative to the terms each
// result sums), bf16 and f16 within one
// rounding of their storage per step (the fused kernel rounds once where
// the formula, run in bf16 ops, would round after each operation); a
// strided parameter and gradient; and the argument errors.
#include "dtensor/tensor/adamw_kernel.h"

#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::Layout;
using testing::RandomTensor;

struct State {
  std::vector<double> p, m, v;
};

// One step of the formula in double, element by element. `scale` gets the
// magnitudes of the terms each result is a sum of (|b1 m| + |(1 - b1) g| for
// m, ...): a rounding error is relative to them, not to a result they cancel
// to.
void ReferenceStep(State& s, State& scale, const std::vector<double>& g,
                   const AdamWOptions& a, int64_t step) {
  const double t = static_cast<double>(step);
  scale = s;
  for (size_t i = 0; i < g.size(); ++i) {
    const double decayed = s.p[i] * (1 - a.learning_rate * a.weight_decay);
    const double m_kept = a.beta1 * s.m[i], m_added = (1 - a.beta1) * g[i];
    s.m[i] = m_kept + m_added;
    s.v[i] = a.beta2 * s.v[i] + (1 - a.beta2) * g[i] * g[i];
    const double m_hat = s.m[i] / (1 - std::pow(a.beta1, t));
    const double denom =
        std::sqrt(s.v[i]) / std::sqrt(1 - std::pow(a.beta2, t)) + a.eps;
    const double update = a.learning_rate * m_hat / denom;
    s.p[i] = decayed - update;
    scale.m[i] = std::abs(m_kept) + std::abs(m_added);
    scale.v[i] = s.v[i];
    scale.p[i] = std::abs(decayed) + std::abs(update);
  }
}

// |got - want| <= rtol * scale + atol elementwise.
void ExpectNear(const Tensor& got, const std::vector<double>& want,
                const std::vector<double>& scale, double rtol, double atol,
                const char* what) {
  const std::vector<double> values = got.ToVector<double>().value();
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(values[i] - want[i]), rtol * scale[i] + atol)
        << what << "[" << i << "]: " << values[i] << " vs " << want[i];
  }
}

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
      State s{p.ToVector<double>().value(), m.ToVector<double>().value(),
              v.ToVector<double>().value()};
      const AdamWOptions args{3e-3, 0.9, 0.95, 1e-5, 0.1};
      for (int64_t step = 1; step <= 4; ++step) {
        const Tensor g = RandomTensor(shape, c.dtype, layout, rng, -2, 2);
        ASSERT_TRUE(AdamWStep(p, m, v, g, args, step).ok());
        State scale;
        ReferenceStep(s, scale, g.ToVector<double>().value(), args, step);
        ExpectNear(m, s.m, scale.m, c.rtol, c.atol, "exp_avg");
        ExpectNear(v, s.v, scale.v, c.rtol, c.atol, "exp_avg_sq");
        ExpectNear(p, s.p, scale.p, c.rtol, c.atol, "param");
        // The next step starts from what the kernel stored.
        s = {p.ToVector<double>().value(), m.ToVector<double>().value(),
             v.ToVector<double>().value()};
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
