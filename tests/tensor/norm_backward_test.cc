// RmsNormBackward and LayerNormBackward against a reference in double written
// here from the textbook formulas, which the first test checks against central
// finite differences of the forward (also in double, written here): random
// shapes, layouts, dtypes, eps, with and without weight and bias.
#include "dtensor/tensor/norm_backward.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::kFloatDTypes;
using ::dtensor::testing::Layout;
using ::dtensor::testing::LayoutName;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::testing::HasSubstr;

// One norm's inputs as doubles: x [rows, width], g like x, w and b [width]
// (empty when absent, or when width is 0: `has_w`, `has_b` tell).
struct Problem {
  int64_t rows = 0;
  int64_t width = 0;
  std::vector<double> x, g, w, b;
  double eps = 1e-5;
  bool layer_norm = false;
  bool has_w = true;
  bool has_b = true;
};

// The forward in double: sum over every element of g * y.
double WeightedOutput(const Problem& p) {
  double total = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    const double* x = p.x.data() + r * p.width;
    double mean = 0;
    if (p.layer_norm) {
      for (int64_t j = 0; j < p.width; ++j) mean += x[j] / p.width;
    }
    double variance = 0;
    for (int64_t j = 0; j < p.width; ++j) {
      variance += (x[j] - mean) * (x[j] - mean) / p.width;
    }
    for (int64_t j = 0; j < p.width; ++j) {
      double y = (x[j] - mean) / std::sqrt(variance + p.eps);
      if (!p.w.empty()) y *= p.w[j];
      if (!p.b.empty()) y += p.b[j];
      total += p.g[r * p.width + j] * y;
    }
  }
  return total;
}

// The gradients in double, from the textbook formulas.
struct Expected {
  std::vector<double> dx, dw, db;
};

Expected TextbookGrads(const Problem& p) {
  Expected e{std::vector<double>(p.x.size()),
             std::vector<double>(p.w.empty() ? 0 : p.width),
             std::vector<double>(p.b.empty() ? 0 : p.width)};
  const double n = static_cast<double>(p.width);
  for (int64_t r = 0; r < p.rows; ++r) {
    const double* x = p.x.data() + r * p.width;
    const double* g = p.g.data() + r * p.width;
    double mean = 0;
    if (p.layer_norm) {
      for (int64_t j = 0; j < p.width; ++j) mean += x[j] / n;
    }
    double variance = 0;
    for (int64_t j = 0; j < p.width; ++j) {
      variance += (x[j] - mean) * (x[j] - mean) / n;
    }
    const double rstd = 1 / std::sqrt(variance + p.eps);
    std::vector<double> xhat(p.width), gh(p.width);
    double mean_gh = 0, mean_gh_xhat = 0;
    for (int64_t j = 0; j < p.width; ++j) {
      xhat[j] = (x[j] - mean) * rstd;
      gh[j] = g[j] * (p.w.empty() ? 1.0 : p.w[j]);
      mean_gh += gh[j] / n;
      mean_gh_xhat += gh[j] * xhat[j] / n;
    }
    for (int64_t j = 0; j < p.width; ++j) {
      e.dx[r * p.width + j] = rstd * (gh[j] - (p.layer_norm ? mean_gh : 0) -
                                      xhat[j] * mean_gh_xhat);
      if (!e.dw.empty()) e.dw[j] += g[j] * xhat[j];
      if (!e.db.empty()) e.db[j] += g[j];
    }
  }
  return e;
}

// The derivative of WeightedOutput along the value at *slot.
double CentralDifference(Problem& p, double* slot) {
  const double h = 1e-5;
  const double saved = *slot;
  *slot = saved + h;
  const double above = WeightedOutput(p);
  *slot = saved - h;
  const double below = WeightedOutput(p);
  *slot = saved;
  return (above - below) / (2 * h);
}

std::vector<double> Values(const Tensor& t) {
  return t.defined() ? t.ToVector<double>().value() : std::vector<double>();
}

Problem RandomProblem(int64_t rows, int64_t width, bool layer_norm,
                      std::mt19937& rng) {
  std::uniform_real_distribution<double> uniform(-2, 2);
  Problem p;
  p.rows = rows;
  p.width = width;
  p.layer_norm = layer_norm;
  p.eps = 0.05;
  for (int64_t i = 0; i < rows * width; ++i) {
    p.x.push_back(uniform(rng));
    p.g.push_back(uniform(rng));
  }
  for (int64_t j = 0; j < width; ++j) {
    p.w.push_back(1 + uniform(rng) / 4);
    p.b.push_back(uniform(rng));
  }
  return p;
}

TEST(NormBackwardReferenceTest, TextbookFormulasMatchFiniteDifferences) {
  std::mt19937 rng(1);
  for (bool layer_norm : {false, true}) {
    Problem p = RandomProblem(3, 5, layer_norm, rng);
    const Expected e = TextbookGrads(p);
    for (size_t i = 0; i < p.x.size(); ++i) {
      EXPECT_NEAR(e.dx[i], CentralDifference(p, &p.x[i]), 1e-7) << i;
    }
    for (int64_t j = 0; j < p.width; ++j) {
      EXPECT_NEAR(e.dw[j], CentralDifference(p, &p.w[j]), 1e-7) << j;
      EXPECT_NEAR(e.db[j], CentralDifference(p, &p.b[j]), 1e-7) << j;
    }
  }
}

// The kernels' results against TextbookGrads on the same (rounded) inputs.
// dx cancels terms of size about r |g w|, so its tolerance is absolute at that
// scale; the parameter gradients sum `rows` terms.
void ExpectMatchesTextbook(const NormGrads& got, const Problem& p, DType dtype,
                           const Shape& shape, const std::string& context) {
  const Expected e = TextbookGrads(p);
  const Tolerance t = ToleranceFor(dtype);
  ExpectClose(got.dx, shape, e.dx, {16 * t.atol, 4 * t.rtol}, context + " dx");
  const double rows = static_cast<double>(std::max<int64_t>(p.rows, 1));
  const Tolerance sums = {4 * t.atol * std::sqrt(rows), 4 * t.rtol};
  ASSERT_EQ(got.dweight.defined(), p.has_w) << context;
  if (got.dweight.defined()) {
    ExpectClose(got.dweight, {p.width}, e.dw, sums, context + " dweight");
  }
  ASSERT_EQ(got.dbias.defined(), p.has_b) << context;
  if (got.dbias.defined()) {
    ExpectClose(got.dbias, {p.width}, e.db, sums, context + " dbias");
  }
}

TEST(NormBackwardTest, RandomShapesParamsLayoutsAndDTypes) {
  std::mt19937 rng(2);
  const std::vector<Layout> layouts = {Layout::kContiguous, Layout::kTransposed,
                                       Layout::kStrided};
  for (int trial = 0; trial < 240; ++trial) {
    Shape shape;
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int d = 0; d + 1 < rank; ++d)
      shape.push_back(Pick<int64_t>({0, 1, 3, 5}, rng));
    shape.push_back(Pick<int64_t>({0, 1, 2, 7, 16, 33}, rng));
    const int64_t width = shape.back();
    const DType dtype = Pick(kFloatDTypes, rng);
    const Layout layout = Pick(layouts, rng);
    const bool layer_norm = trial % 2 == 0;
    const double eps = Pick<double>({1e-6, 1e-5, 0.1}, rng);
    const Tensor x = RandomTensor(shape, dtype, layout, rng, -2, 3);
    const Tensor g = RandomTensor(shape, dtype, Pick(layouts, rng), rng);
    const Tensor w =
        trial % 3 == 0
            ? Tensor()
            : RandomTensor({width}, dtype, Layout::kStrided, rng, 0.5, 1.5);
    const Tensor b =
        layer_norm && trial % 4 != 0
            ? RandomTensor({width}, dtype, Layout::kContiguous, rng)
            : Tensor();
    const std::string context = absl::StrCat(
        "trial ", trial, (layer_norm ? " layer_norm " : " rms_norm "),
        ShapeToString(shape), " ", std::string(DTypeName(dtype)), " ",
        LayoutName(layout), w.defined() ? " weight" : "",
        b.defined() ? " bias" : "", " eps ", eps);
    absl::StatusOr<NormGrads> got = layer_norm
                                        ? LayerNormBackward(x, w, b, g, eps)
                                        : RmsNormBackward(x, w, g, eps);
    ASSERT_TRUE(got.ok()) << context << ": " << got.status();
    EXPECT_TRUE(got->dx.is_contiguous()) << context;
    Problem p;
    p.rows = width == 0 ? 0 : x.numel() / width;
    p.width = width;
    p.x = Values(x);
    p.g = Values(g);
    p.w = Values(w);
    p.b = Values(b);
    p.eps = eps;
    p.layer_norm = layer_norm;
    p.has_w = w.defined();
    p.has_b = b.defined();
    ExpectMatchesTextbook(*got, p, dtype, shape, context);
  }
}

TEST(NormBackwardTest, ManyRowsSumTheParameterGradients) {
  // More rows than the device's chunks of rows (dtensor/tensor/cuda/
  // norm_kernels.h), an uneven last chunk.
  std::mt19937 rng(3);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor x = RandomTensor({131, 24}, dtype, Layout::kContiguous, rng);
    const Tensor g = RandomTensor({131, 24}, dtype, Layout::kContiguous, rng);
    const Tensor w =
        RandomTensor({24}, dtype, Layout::kContiguous, rng, 0.5, 2);
    const Tensor b = RandomTensor({24}, dtype, Layout::kContiguous, rng);
    absl::StatusOr<NormGrads> got = LayerNormBackward(x, w, b, g, 1e-5);
    ASSERT_TRUE(got.ok()) << got.status();
    Problem p{131, 24, Values(x), Values(g), Values(w), Values(b), 1e-5, true};
    ExpectMatchesTextbook(*got, p, dtype, {131, 24},
                          std::string(DTypeName(dtype)));
  }
}

void ExpectInvalidArgument(const absl::StatusOr<NormGrads>& result,
                           const std::vector<std::string>& fragments) {
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  for (const std::string& fragment : fragments) {
    EXPECT_THAT(result.status().message(), HasSubstr(fragment));
  }
}

TEST(NormBackwardTest, BadInputsAreErrorsNamingTheValue) {
  const Tensor x = *Tensor::Zeros({2, 4}, DType::kF32);
  const Tensor g = *Tensor::Zeros({2, 4}, DType::kF32);
  ExpectInvalidArgument(
      RmsNormBackward(x, Tensor(), *Tensor::Zeros({2, 3}, DType::kF32)),
      {"RmsNormBackward", "[2, 3]", "[2, 4]"});
  ExpectInvalidArgument(LayerNormBackward(x, Tensor(), Tensor(),
                                          *Tensor::Zeros({2, 4}, DType::kF64)),
                        {"LayerNormBackward", "f64"});
  ExpectInvalidArgument(RmsNormBackward(x, *Tensor::Ones({3}, DType::kF32), g),
                        {"weight", "[3]"});
  ExpectInvalidArgument(
      LayerNormBackward(x, Tensor(), *Tensor::Ones({4}, DType::kBF16), g),
      {"bias", "bf16"});
  ExpectInvalidArgument(
      RmsNormBackward(*Tensor::Zeros({4}, DType::kI32), Tensor(),
                      *Tensor::Zeros({4}, DType::kI32)),
      {"i32"});
  ExpectInvalidArgument(
      RmsNormBackward(Tensor::Scalar(1.0), Tensor(), Tensor::Scalar(1.0)),
      {"[]"});
  ExpectInvalidArgument(RmsNormBackward(x, Tensor(), Tensor()),
                        {"grad_out", "undefined"});
}

}  // namespace
}  // namespace dtensor
