#include "dtensor/tensor/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::kAllDTypes;
using ::dtensor::testing::kFloatDTypes;
using ::dtensor::testing::kNumericDTypes;
using ::dtensor::testing::Layout;
using ::dtensor::testing::LayoutName;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::dtensor::testing::Unravel;

// A random input of `shape`: contiguous, transposed, strided, or expanded
// along one dim from size 1 (stride 0). Values as RandomTensor draws them.
Tensor RandomInput(const Shape& shape, DType dtype, std::mt19937& rng,
                   double low, double high, std::string* description) {
  const int choice = std::uniform_int_distribution<int>(0, 3)(rng);
  if (choice == 3 && !shape.empty()) {
    const size_t dim =
        std::uniform_int_distribution<size_t>(0, shape.size() - 1)(rng);
    Shape base = shape;
    base[dim] = 1;
    *description = absl::StrCat("expanded along ", dim);
    return RandomTensor(base, dtype, Layout::kContiguous, rng, low, high)
        .Expand(shape)
        .value();
  }
  const Layout layout = choice == 1   ? Layout::kTransposed
                        : choice == 2 ? Layout::kStrided
                                      : Layout::kContiguous;
  *description = LayoutName(layout);
  return RandomTensor(shape, dtype, layout, rng, low, high);
}

// A random shape of rank 0..4 with sizes that include 0 and 1, at most
// `max_numel` elements.
Shape RandomShape(std::mt19937& rng, int64_t max_numel = 400) {
  const std::vector<int64_t> sizes = {0, 1, 1, 2, 3, 4, 5, 7, 9};
  while (true) {
    Shape shape(std::uniform_int_distribution<int>(0, 4)(rng));
    for (int64_t& size : shape) size = Pick(sizes, rng);
    if (NumElements(shape) <= max_numel) return shape;
  }
}

// A shape that broadcasts to `shape`: a suffix of it (random length) with
// some sizes replaced by 1.
Shape BroadcastableTo(const Shape& shape, std::mt19937& rng) {
  const size_t rank =
      std::uniform_int_distribution<size_t>(0, shape.size())(rng);
  Shape result(shape.end() - rank, shape.end());
  for (int64_t& size : result) {
    if (std::bernoulli_distribution(0.3)(rng)) size = 1;
  }
  return result;
}

// The element of `t` that broadcasting maps to `index` of a result of higher
// or equal rank: dims align at the right and size-1 dims repeat.
double BroadcastAt(const Tensor& t, const std::vector<int64_t>& index) {
  const size_t lead = index.size() - t.shape().size();
  std::vector<int64_t> own(t.shape().size());
  for (size_t d = 0; d < own.size(); ++d) {
    own[d] = t.shape()[d] == 1 ? 0 : index[lead + d];
  }
  return t.At(own);
}

// The expected values of a result of `shape`: f applied to the broadcast
// elements of `inputs`, row-major.
std::vector<double> Reference(
    const Shape& shape, const std::vector<Tensor>& inputs,
    const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> expected(NumElements(shape));
  std::vector<double> args(inputs.size());
  for (int64_t i = 0; i < NumElements(shape); ++i) {
    const std::vector<int64_t> index = Unravel(i, shape);
    for (size_t k = 0; k < inputs.size(); ++k) {
      args[k] = BroadcastAt(inputs[k], index);
    }
    expected[i] = f(args);
  }
  return expected;
}

double TruncatedDivision(double x, double y) { return std::trunc(x / y); }

// ---- Binary ops. ----

using BinaryFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);

struct BinaryCase {
  std::string name;
  BinaryFn fn;
  std::function<double(double, double)> reference;
  std::vector<DType> dtypes;
  bool gives_bool = false;
  // Input ranges: a in [a_low, a_high], b in [b_low, b_high].
  double a_low = -3, a_high = 3, b_low = -3, b_high = 3;
};

std::vector<BinaryCase> BinaryCases() {
  const auto integer_or_true_div = [](double x, double y) { return x / y; };
  return {
      {"Add", Add, std::plus<double>(), kNumericDTypes},
      {"Sub", Sub, std::minus<double>(), kNumericDTypes},
      {"Mul", Mul, std::multiplies<double>(), kNumericDTypes},
      // Divisors in [1, 5] avoid integer division by zero; negative divisors
      // are covered by IntegerDivisionTruncatesTowardZero.
      {"Div", Div, integer_or_true_div, kNumericDTypes, false, -20, 20, 1, 5},
      {"Pow", Pow, [](double x, double y) { return std::pow(x, y); },
       kFloatDTypes, false, 0.25, 3, -2, 2},
      // grad * d/dx (x sigmoid(x)), differentiated by hand in double.
      {"SiluBackward", SiluBackward,
       [](double g, double x) {
         const double s = 1 / (1 + std::exp(-x));
         return g * (s + x * s * (1 - s));
       },
       kFloatDTypes},
      {"Maximum", Maximum, [](double x, double y) { return std::max(x, y); },
       kAllDTypes},
      {"Minimum", Minimum, [](double x, double y) { return std::min(x, y); },
       kAllDTypes},
      {"Eq", Eq, [](double x, double y) { return (x == y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Ne", Ne, [](double x, double y) { return (x != y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Lt", Lt, [](double x, double y) { return (x < y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Le", Le, [](double x, double y) { return (x <= y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Gt", Gt, [](double x, double y) { return (x > y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Ge", Ge, [](double x, double y) { return (x >= y ? 1.0 : 0.0); },
       kAllDTypes, true},
  };
}

TEST(ElementwiseTest, BinaryOpsMatchReferenceOverShapesLayoutsAndDTypes) {
  std::mt19937 rng(1234);
  for (const BinaryCase& op : BinaryCases()) {
    for (DType dtype : op.dtypes) {
      for (int trial = 0; trial < 30; ++trial) {
        const Shape shape = RandomShape(rng);
        // Either operand may be the one that broadcasts.
        Shape a_shape = shape;
        Shape b_shape = BroadcastableTo(shape, rng);
        if (trial % 2 == 1) std::swap(a_shape, b_shape);
        // Every third comparison compares a tensor with itself, so that
        // floating comparisons meet ties.
        const bool self = op.gives_bool && trial % 3 == 0;
        if (self) b_shape = a_shape;
        const Shape& result_shape = self ? a_shape : shape;
        std::string a_layout, b_layout;
        const Tensor a =
            RandomInput(a_shape, dtype, rng, op.a_low, op.a_high, &a_layout);
        const Tensor b = self ? a
                              : RandomInput(b_shape, dtype, rng, op.b_low,
                                            op.b_high, &b_layout);
        const std::string context =
            absl::StrCat(op.name, " ", std::string(DTypeName(dtype)), " a ",
                         ShapeToString(a_shape), " ", a_layout, ", b ",
                         ShapeToString(b_shape), " ", self ? "= a" : b_layout);
        absl::StatusOr<Tensor> result = op.fn(a, b);
        ASSERT_TRUE(result.ok()) << context << ": " << result.status();
        EXPECT_EQ(result->dtype(), op.gives_bool ? DType::kBool : dtype)
            << context;
        EXPECT_TRUE(result->is_contiguous()) << context;
        const bool integer = !IsFloatingPoint(dtype);
        const std::vector<double> expected =
            Reference(result_shape, {a, b}, [&](const std::vector<double>& v) {
              if (op.name == "Div" && integer) {
                return TruncatedDivision(v[0], v[1]);
              }
              return op.reference(v[0], v[1]);
            });
        ExpectClose(*result, result_shape, expected,
                    op.gives_bool ? Tolerance{0, 0} : ToleranceFor(dtype),
                    context);
      }
    }
  }
}

TEST(ElementwiseTest, ScalarFormsConvertTheScalarToTheTensorDType) {
  std::mt19937 rng(99);
  using ScalarFn = absl::StatusOr<Tensor> (*)(const Tensor&, double);
  struct ScalarCase {
    std::string name;
    ScalarFn fn;
    std::function<double(double, double)> reference;
    std::vector<DType> dtypes;
    bool gives_bool = false;
  };
  const std::vector<ScalarCase> cases = {
      {"Add", Add, std::plus<double>(), kNumericDTypes},
      {"Sub", Sub, std::minus<double>(), kNumericDTypes},
      {"Mul", Mul, std::multiplies<double>(), kNumericDTypes},
      {"Div", Div, TruncatedDivision, {DType::kI32, DType::kI64}},
      {"Div", Div, [](double x, double y) { return x / y; }, kFloatDTypes},
      {"Pow", Pow, [](double x, double y) { return std::pow(x, y); },
       kFloatDTypes},
      {"Eq", Eq, [](double x, double y) { return (x == y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Ne", Ne, [](double x, double y) { return (x != y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Lt", Lt, [](double x, double y) { return (x < y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Le", Le, [](double x, double y) { return (x <= y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Gt", Gt, [](double x, double y) { return (x > y ? 1.0 : 0.0); },
       kAllDTypes, true},
      {"Ge", Ge, [](double x, double y) { return (x >= y ? 1.0 : 0.0); },
       kAllDTypes, true},
  };
  // 2.7 becomes 2 for integers (truncation) and 1 for bool; 1.0 gives ties.
  const std::vector<double> scalars = {2.7, -1.3, 1.0, 0.5};
  for (const ScalarCase& op : cases) {
    for (DType dtype : op.dtypes) {
      for (double scalar : scalars) {
        // Pow of a negative base needs an integral exponent; Div of integers
        // needs a non-zero divisor.
        const bool positive_base = op.name == "Pow";
        if (op.name == "Div" && !IsFloatingPoint(dtype) &&
            std::trunc(scalar) == 0) {
          continue;
        }
        const Shape shape = RandomShape(rng);
        std::string layout;
        const Tensor a = RandomInput(shape, dtype, rng,
                                     positive_base ? 0.25 : -3, 3, &layout);
        const double converted = Tensor::Scalar(scalar, dtype).Item().value();
        const std::string context =
            absl::StrCat(op.name, " ", std::string(DTypeName(dtype)), " ",
                         ShapeToString(shape), " ", layout, " with ", scalar);
        absl::StatusOr<Tensor> result = op.fn(a, scalar);
        ASSERT_TRUE(result.ok()) << context << ": " << result.status();
        EXPECT_EQ(result->dtype(), op.gives_bool ? DType::kBool : dtype)
            << context;
        ExpectClose(*result, shape,
                    Reference(shape, {a},
                              [&](const std::vector<double>& v) {
                                return op.reference(v[0], converted);
                              }),
                    op.gives_bool ? Tolerance{0, 0} : ToleranceFor(dtype),
                    context);
      }
    }
  }
}

TEST(ElementwiseTest, PowOfNegativeBaseWithIntegralExponent) {
  const Tensor a = Tensor::FromVector<double>({-2, -0.5, 3, -1}, {4}).value();
  absl::StatusOr<Tensor> cubed = Pow(a, 3.0);
  ASSERT_TRUE(cubed.ok()) << cubed.status();
  ExpectClose(*cubed, {4}, {-8, -0.125, 27, -1}, ToleranceFor(DType::kF64));
  absl::StatusOr<Tensor> squared =
      Pow(a, Tensor::FromVector<double>({2, 2, 2, 2}, {4}).value());
  ASSERT_TRUE(squared.ok()) << squared.status();
  ExpectClose(*squared, {4}, {4, 0.25, 9, 1}, ToleranceFor(DType::kF64));
}

// ---- Unary ops. ----

using UnaryFn = std::function<absl::StatusOr<Tensor>(const Tensor&)>;

struct UnaryCase {
  std::string name;
  UnaryFn fn;
  std::function<double(double)> reference;
  std::vector<DType> dtypes;
  double low = -3, high = 3;
};

std::vector<UnaryCase> UnaryCases() {
  const double kPi = 3.14159265358979323846;
  return {
      {"Neg", Neg, [](double x) { return -x; }, kNumericDTypes},
      {"Abs", Abs, [](double x) { return std::fabs(x); }, kNumericDTypes},
      {"Relu", Relu, [](double x) { return x > 0 ? x : 0.0; }, kNumericDTypes},
      {"Exp", Exp, [](double x) { return std::exp(x); }, kFloatDTypes},
      {"Log", Log, [](double x) { return std::log(x); }, kFloatDTypes, 0.05, 5},
      {"Sqrt", Sqrt, [](double x) { return std::sqrt(x); }, kFloatDTypes, 0, 5},
      {"Rsqrt", Rsqrt, [](double x) { return 1 / std::sqrt(x); }, kFloatDTypes,
       0.05, 5},
      {"Gelu(erf)", [](const Tensor& t) { return Gelu(t); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       kFloatDTypes},
      {"Gelu(tanh)",
       [](const Tensor& t) { return Gelu(t, GeluApproximation::kTanh); },
       [kPi](double x) {
         return 0.5 * x *
                (1 +
                 std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
       },
       kFloatDTypes},
      {"Silu", Silu, [](double x) { return x / (1 + std::exp(-x)); },
       kFloatDTypes},
      {"Sigmoid", Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); },
       kFloatDTypes},
      {"Tanh", Tanh, [](double x) { return std::tanh(x); }, kFloatDTypes},
  };
}

TEST(ElementwiseTest, UnaryOpsMatchReferenceOverShapesLayoutsAndDTypes) {
  std::mt19937 rng(4321);
  for (const UnaryCase& op : UnaryCases()) {
    for (DType dtype : op.dtypes) {
      for (int trial = 0; trial < 25; ++trial) {
        const Shape shape = RandomShape(rng);
        std::string layout;
        const Tensor x =
            RandomInput(shape, dtype, rng, op.low, op.high, &layout);
        const std::string context =
            absl::StrCat(op.name, " ", std::string(DTypeName(dtype)), " ",
                         ShapeToString(shape), " ", layout);
        absl::StatusOr<Tensor> result = op.fn(x);
        ASSERT_TRUE(result.ok()) << context << ": " << result.status();
        EXPECT_EQ(result->dtype(), dtype) << context;
        ExpectClose(*result, shape,
                    Reference(shape, {x},
                              [&](const std::vector<double>& v) {
                                return op.reference(v[0]);
                              }),
                    ToleranceFor(dtype), context);
      }
    }
  }
}

TEST(ElementwiseTest, LargeContiguousRunsIncludingRemainders) {
  // Long runs take the vectorizable loops; odd lengths leave remainders.
  std::mt19937 rng(5);
  for (int64_t n : {1, 15, 1000, 4099}) {
    const Tensor a = RandomTensor({n}, DType::kF32, Layout::kContiguous, rng);
    const Tensor b = RandomTensor({n}, DType::kF32, Layout::kContiguous, rng);
    const Tensor row = RandomTensor({1}, DType::kF32, Layout::kContiguous, rng);
    absl::StatusOr<Tensor> sum = Add(a, b);
    absl::StatusOr<Tensor> scaled = Mul(row, a);
    absl::StatusOr<Tensor> exp = Exp(a);
    ASSERT_TRUE(sum.ok() && scaled.ok() && exp.ok());
    std::vector<double> expected_sum(n), expected_scaled(n), expected_exp(n);
    for (int64_t i = 0; i < n; ++i) {
      expected_sum[i] = a.At({i}) + b.At({i});
      expected_scaled[i] = row.At({0}) * a.At({i});
      expected_exp[i] = std::exp(a.At({i}));
    }
    const Tolerance tolerance = ToleranceFor(DType::kF32);
    ExpectClose(*sum, {n}, expected_sum, tolerance, "Add");
    ExpectClose(*scaled, {n}, expected_scaled, tolerance, "Mul");
    ExpectClose(*exp, {n}, expected_exp, tolerance, "Exp");
  }
}

// ---- Where. ----

TEST(ElementwiseTest, WhereBroadcastsAllThreeOperands) {
  std::mt19937 rng(77);
  for (DType dtype : kAllDTypes) {
    for (int trial = 0; trial < 30; ++trial) {
      const Shape shape = RandomShape(rng);
      // Each operand drops leading dims or sets sizes to 1 at random; the
      // result shape is recovered from the three.
      std::vector<Shape> shapes = {BroadcastableTo(shape, rng),
                                   BroadcastableTo(shape, rng),
                                   BroadcastableTo(shape, rng)};
      shapes[trial % 3] = shape;
      std::string layouts[3];
      const Tensor cond =
          RandomInput(shapes[0], DType::kBool, rng, 0, 1, &layouts[0]);
      const Tensor a = RandomInput(shapes[1], dtype, rng, -3, 3, &layouts[1]);
      const Tensor b = RandomInput(shapes[2], dtype, rng, -3, 3, &layouts[2]);
      const std::string context =
          absl::StrCat("Where ", std::string(DTypeName(dtype)), " cond ",
                       ShapeToString(shapes[0]), " ", layouts[0], ", a ",
                       ShapeToString(shapes[1]), " ", layouts[1], ", b ",
                       ShapeToString(shapes[2]), " ", layouts[2]);
      absl::StatusOr<Tensor> result = Where(cond, a, b);
      ASSERT_TRUE(result.ok()) << context << ": " << result.status();
      EXPECT_EQ(result->dtype(), dtype) << context;
      ExpectClose(*result, shape,
                  Reference(shape, {cond, a, b},
                            [](const std::vector<double>& v) {
                              return v[0] != 0 ? v[1] : v[2];
                            }),
                  Tolerance{0, 0}, context);
    }
  }
}

// ---- Exact integer and NaN semantics. ----

TEST(ElementwiseTest, IntegerDivisionTruncatesTowardZero) {
  for (DType dtype : {DType::kI32, DType::kI64}) {
    const Tensor a = Tensor::FromVector<double>({7, -7, 7, -7, 0, 1}, {6})
                         .value()
                         .To(dtype)
                         .value();
    const Tensor b = Tensor::FromVector<double>({2, 2, -2, -2, -3, 5}, {6})
                         .value()
                         .To(dtype)
                         .value();
    absl::StatusOr<Tensor> result = Div(a, b);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectClose(*result, {6}, {3, -3, -3, 3, 0, 0}, Tolerance{0, 0},
                std::string(DTypeName(dtype)));
  }
}

TEST(ElementwiseTest, IntegerOverflowWrapsAround) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  const Tensor a = Tensor::FromVector<int32_t>({kMax, kMin, kMin}, {3}).value();
  const Tensor minus_one =
      Tensor::FromVector<int32_t>({-1, -1, -1}, {3}).value();
  absl::StatusOr<Tensor> sum = Add(a, 1.0);
  absl::StatusOr<Tensor> quotient = Div(a, minus_one);
  absl::StatusOr<Tensor> negated = Neg(a);
  absl::StatusOr<Tensor> product = Mul(a, 2.0);
  ASSERT_TRUE(sum.ok() && quotient.ok() && negated.ok() && product.ok());
  EXPECT_EQ(sum->ToVector<int32_t>().value(),
            (std::vector<int32_t>{kMin, kMin + 1, kMin + 1}));
  EXPECT_EQ(quotient->ToVector<int32_t>().value(),
            (std::vector<int32_t>{-kMax, kMin, kMin}));
  EXPECT_EQ(negated->ToVector<int32_t>().value(),
            (std::vector<int32_t>{-kMax, kMin, kMin}));
  EXPECT_EQ(product->ToVector<int32_t>().value(),
            (std::vector<int32_t>{-2, 0, 0}));
}

TEST(ElementwiseTest, NanPropagatesThroughMaximumMinimumAndRelu) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : kFloatDTypes) {
    const Tensor a = Tensor::FromVector<double>({nan, 1, nan, -2}, {4})
                         .value()
                         .To(dtype)
                         .value();
    const Tensor b = Tensor::FromVector<double>({1, nan, nan, 3}, {4})
                         .value()
                         .To(dtype)
                         .value();
    const std::string context(std::string(DTypeName(dtype)));
    ExpectClose(Maximum(a, b).value(), {4}, {nan, nan, nan, 3}, Tolerance{0, 0},
                context);
    ExpectClose(Minimum(a, b).value(), {4}, {nan, nan, nan, -2},
                Tolerance{0, 0}, context);
    ExpectClose(Relu(a).value(), {4}, {nan, 1, nan, 0}, Tolerance{0, 0},
                context);
    // NaN compares unequal to everything, itself included.
    ExpectClose(Eq(a, a).value(), {4}, {0, 1, 0, 1}, Tolerance{0, 0}, context);
    ExpectClose(Ne(a, a).value(), {4}, {1, 0, 1, 0}, Tolerance{0, 0}, context);
  }
}

TEST(ElementwiseTest, BoolMaximumAndMinimumAreOrAndAnd) {
  const Tensor a =
      Tensor::FromVector<bool>({false, false, true, true}, {4}).value();
  const Tensor b =
      Tensor::FromVector<bool>({false, true, false, true}, {4}).value();
  EXPECT_EQ(Maximum(a, b).value().ToVector<bool>().value(),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(Minimum(a, b).value().ToVector<bool>().value(),
            (std::vector<bool>{false, false, false, true}));
}

// ---- Shapes. ----

TEST(BroadcastShapesTest, AlignsAtTheRightAndStretchesOnes) {
  EXPECT_EQ(BroadcastShapes({2, 1, 4}, {3, 1}).value(), (Shape{2, 3, 4}));
  EXPECT_EQ(BroadcastShapes({}, {5, 0}).value(), (Shape{5, 0}));
  EXPECT_EQ(BroadcastShapes({1, 0}, {7, 1}).value(), (Shape{7, 0}));
  EXPECT_EQ(BroadcastShapes({3}, {3}).value(), (Shape{3}));
}

TEST(ElementwiseTest, ZeroDimOperandsGiveZeroDimResults) {
  absl::StatusOr<Tensor> result =
      Add(Tensor::Scalar(2.0, DType::kF64), Tensor::Scalar(3.5, DType::kF64));
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectClose(*result, {}, {5.5}, ToleranceFor(DType::kF64));
}

}  // namespace
}  // namespace dtensor
