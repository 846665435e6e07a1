// AdamWStepMany (dtensor/tensor/adamw_kernel.h), the multi-tensor AdamW, on
// the CPU: bitwise equal to AdamWStep called on each parameter in turn over
// random parameter sets (f32, bf16, f64 and f16 mixed; empty, one-element,
// odd, strided and multi-chunk tensors; per-parameter steps that differ, so
// several groups), within the formula's rounding of torch.optim.AdamW in
// double (tests/tensor/reference_adamw.h), and its argument errors, which
// name the parameter and come before anything is written.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/reference_adamw.h"

namespace dtensor {
namespace {

using testing::AdamWState;
using testing::AdamWStateOf;
using testing::Layout;
using testing::Pick;
using testing::RandomTensor;

const AdamWOptions kOptions{3e-3, 0.9, 0.95, 1e-5, 0.1};

// A random parameter set drawn from `seed` (the same set for the same seed):
// parameters and moments (v >= 0) with their steps.
std::vector<AdamWOperands> RandomEntries(unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<DType> dtypes = {DType::kF32,  DType::kBF16, DType::kF32,
                                     DType::kBF16, DType::kF64,  DType::kF16};
  const std::vector<Shape> shapes = {{0},  {1},      {7},     {3, 11},
                                     {33}, {4, 513}, {70001}, {0, 5}};
  const int count = std::uniform_int_distribution<int>(1, 14)(rng);
  std::vector<AdamWOperands> entries;
  for (int i = 0; i < count; ++i) {
    const DType dtype = Pick(dtypes, rng);
    const Shape shape = Pick(shapes, rng);
    const Layout layout = std::uniform_int_distribution<int>(0, 4)(rng) == 0
                              ? Layout::kTransposed
                              : Layout::kContiguous;
    AdamWOperands e;
    e.param = RandomTensor(shape, dtype, layout, rng);
    e.exp_avg = RandomTensor(shape, dtype, Layout::kContiguous, rng, -0.1, 0.1);
    e.exp_avg_sq =
        RandomTensor(shape, dtype, Layout::kContiguous, rng, 0, 0.01);
    e.step = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    entries.push_back(e);
  }
  return entries;
}

// Fresh gradients for `entries`, drawn from `rng`.
void SetRandomGrads(std::vector<AdamWOperands>& entries, std::mt19937& rng) {
  for (AdamWOperands& e : entries) {
    e.grad = RandomTensor(e.param.shape(), e.param.dtype(),
                          Pick(testing::kLayouts, rng), rng, -2, 2);
  }
}

// The elements of a tensor as doubles (exact for every floating dtype).
std::vector<double> Values(const Tensor& t) {
  return t.ToVector<double>().value();
}

TEST(AdamWManyTest, EqualsAdamWStepOnEachParameterBitwise) {
  for (unsigned trial = 0; trial < 30; ++trial) {
    std::vector<AdamWOperands> many = RandomEntries(trial);
    std::vector<AdamWOperands> single = RandomEntries(trial);
    std::mt19937 rng(1000 + trial);
    for (int round = 0; round < 3; ++round) {
      SetRandomGrads(many, rng);
      for (size_t i = 0; i < many.size(); ++i) {
        single[i].grad = many[i].grad;
        // Steps that differ between parameters, and that advance unevenly.
        many[i].step = single[i].step += 1 + static_cast<int64_t>(i % 2);
      }
      ASSERT_TRUE(AdamWStepMany(many, kOptions).ok());
      for (const AdamWOperands& e : single) {
        ASSERT_TRUE(AdamWStep(e.param, e.exp_avg, e.exp_avg_sq, e.grad,
                              kOptions, e.step)
                        .ok());
      }
      for (size_t i = 0; i < many.size(); ++i) {
        const std::string what =
            absl::StrCat("trial ", trial, " round ", round, " parameter ", i,
                         " ", std::string(DTypeName(many[i].param.dtype())),
                         " ", ShapeToString(many[i].param.shape()));
        ASSERT_EQ(Values(many[i].param), Values(single[i].param)) << what;
        ASSERT_EQ(Values(many[i].exp_avg), Values(single[i].exp_avg)) << what;
        ASSERT_EQ(Values(many[i].exp_avg_sq), Values(single[i].exp_avg_sq))
            << what;
      }
    }
  }
}

// Per step, of p, m and v: as adamw_kernel_test's bounds.
double RelativeTolerance(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return 1e-12;
    case DType::kF32:
      return 2e-6;
    case DType::kBF16:
      return 1.0 / 128;
    default:
      return 1e-3;
  }
}

TEST(AdamWManyTest, EqualsTheFormulaInDouble) {
  for (unsigned trial = 0; trial < 8; ++trial) {
    std::vector<AdamWOperands> entries = RandomEntries(100 + trial);
    std::mt19937 rng(trial);
    for (int round = 0; round < 3; ++round) {
      SetRandomGrads(entries, rng);
      std::vector<AdamWState> want;
      for (AdamWOperands& e : entries) {
        want.push_back(AdamWStateOf(e.param, e.exp_avg, e.exp_avg_sq));
        e.step += 1;
      }
      ASSERT_TRUE(AdamWStepMany(entries, kOptions).ok());
      for (size_t i = 0; i < entries.size(); ++i) {
        const AdamWOperands& e = entries[i];
        SCOPED_TRACE(
            absl::StrCat("trial ", trial, " round ", round, " parameter ", i));
        AdamWState scale;
        testing::ReferenceAdamWStep(want[i], scale, Values(e.grad), kOptions,
                                    e.step);
        const double rtol = RelativeTolerance(e.param.dtype());
        const double atol = e.param.dtype() == DType::kF16 ? 0x1p-24 : 0;
        testing::ExpectNearScaled(e.exp_avg, want[i].m, scale.m, rtol, atol,
                                  "exp_avg");
        testing::ExpectNearScaled(e.exp_avg_sq, want[i].v, scale.v, rtol, atol,
                                  "exp_avg_sq");
        testing::ExpectNearScaled(e.param, want[i].p, scale.p, rtol, atol,
                                  "param");
      }
    }
  }
}

// Three good f32 entries [4, 3]: entry 2 is made bad by the cases.
std::vector<AdamWOperands> GoodEntries() {
  std::vector<AdamWOperands> entries(3);
  for (AdamWOperands& e : entries) {
    e.param = *Tensor::Ones({4, 3}, DType::kF32);
    e.exp_avg = *Tensor::Zeros({4, 3}, DType::kF32);
    e.exp_avg_sq = *Tensor::Zeros({4, 3}, DType::kF32);
    e.grad = *Tensor::Ones({4, 3}, DType::kF32);
  }
  return entries;
}

TEST(AdamWManyTest, ErrorsNameTheParameterBeforeAnyWrite) {
  struct Case {
    const char* needle;
    void (*spoil)(std::vector<AdamWOperands>&);
  };
  const Case cases[] = {
      {"grad has shape [3, 4]",
       [](std::vector<AdamWOperands>& e) {
         e[2].grad = *Tensor::Zeros({3, 4}, DType::kF32);
       }},
      {"exp_avg",
       [](std::vector<AdamWOperands>& e) {
         e[2].exp_avg = *Tensor::Zeros({4, 3}, DType::kBF16);
       }},
      {"grad", [](std::vector<AdamWOperands>& e) { e[2].grad = Tensor(); }},
      {"param",
       [](std::vector<AdamWOperands>& e) {
         e[2].param = *Tensor::Zeros({4, 3}, DType::kI32);
       }},
      {"step 0", [](std::vector<AdamWOperands>& e) { e[2].step = 0; }},
      {"distinct",
       [](std::vector<AdamWOperands>& e) { e[2].exp_avg_sq = e[2].exp_avg; }},
      {"exp_avg shares its buffer with parameter 0",
       [](std::vector<AdamWOperands>& e) { e[2].exp_avg = e[0].exp_avg; }},
  };
  for (const Case& c : cases) {
    std::vector<AdamWOperands> entries = GoodEntries();
    c.spoil(entries);
    const absl::Status status = AdamWStepMany(entries, kOptions);
    EXPECT_FALSE(status.ok()) << c.needle;
    EXPECT_TRUE(absl::StrContains(status.message(), "parameter 2: "))
        << status.message();
    EXPECT_TRUE(absl::StrContains(status.message(), c.needle))
        << status.message();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(Values(entries[i].param), std::vector<double>(12, 1.0))
          << c.needle << ": parameter " << i << " was written";
      EXPECT_EQ(Values(entries[i].exp_avg), std::vector<double>(12, 0.0))
          << c.needle << ": parameter " << i << " was written";
    }
  }
  EXPECT_TRUE(AdamWStepMany({}, kOptions).ok());
}

}  // namespace
}  // namespace dtensor
