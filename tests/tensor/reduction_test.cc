#include "dtensor/tensor/reduction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::kAllDTypes;
using ::dtensor::testing::kFloatDTypes;
using ::dtensor::testing::Layout;
using ::dtensor::testing::LayoutName;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Ravel;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::dtensor::testing::Unravel;
using ::testing::AllOf;
using ::testing::HasSubstr;

const double kNan = std::numeric_limits<double>::quiet_NaN();

// A random input of `shape`: contiguous, transposed, strided, or expanded
// along one dim from size 1 (stride 0). Integers lie in [-3, 3] so that
// maxima tie.
Tensor RandomInput(const Shape& shape, DType dtype, std::mt19937& rng,
                   std::string* description) {
  const int choice = std::uniform_int_distribution<int>(0, 3)(rng);
  if (choice == 3 && !shape.empty()) {
    const size_t dim =
        std::uniform_int_distribution<size_t>(0, shape.size() - 1)(rng);
    Shape base = shape;
    base[dim] = 1;
    *description = absl::StrCat("expanded along ", dim);
    return RandomTensor(base, dtype, Layout::kContiguous, rng, -3, 3)
        .Expand(shape)
        .value();
  }
  const Layout layout = choice == 1   ? Layout::kTransposed
                        : choice == 2 ? Layout::kStrided
                                      : Layout::kContiguous;
  *description = LayoutName(layout);
  return RandomTensor(shape, dtype, layout, rng, -3, 3);
}

Shape RandomShape(std::mt19937& rng) {
  const std::vector<int64_t> sizes = {0, 1, 1, 2, 3, 4, 6, 9, 17};
  while (true) {
    Shape shape(std::uniform_int_distribution<int>(0, 4)(rng));
    for (int64_t& size : shape) size = Pick(sizes, rng);
    if (NumElements(shape) <= 600) return shape;
  }
}

// A random set of dims of a rank-`rank` tensor, each written as d or d - rank
// at random, in random order; may be empty (= all dims).
std::vector<int64_t> RandomDims(int64_t rank, std::mt19937& rng) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!std::bernoulli_distribution(0.5)(rng)) continue;
    dims.push_back(std::bernoulli_distribution(0.5)(rng) ? d : d - rank);
  }
  std::shuffle(dims.begin(), dims.end(), rng);
  return dims;
}

// The elements of `a` grouped by the result element they reduce into, in
// the order of increasing position along the reduced dims; and the result
// shape.
struct Groups {
  Shape shape;
  std::vector<std::vector<double>> values;
};

Groups GroupByResult(const Tensor& a, const std::vector<int64_t>& dims,
                     bool keepdim) {
  const int64_t rank = a.dim();
  std::vector<bool> reduced(rank, dims.empty());
  for (int64_t d : dims) reduced[(d + rank) % rank] = true;
  Shape kept_shape;  // The result shape with reduced dims kept as 1.
  Groups groups;
  for (int64_t d = 0; d < rank; ++d) {
    kept_shape.push_back(reduced[d] ? 1 : a.shape()[d]);
    if (!reduced[d] || keepdim) groups.shape.push_back(kept_shape.back());
  }
  groups.values.resize(NumElements(kept_shape));
  for (int64_t i = 0; i < a.numel(); ++i) {
    const std::vector<int64_t> index = Unravel(i, a.shape());
    std::vector<int64_t> result_index = index;
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d]) result_index[d] = 0;
    }
    groups.values[Ravel(result_index, kept_shape)].push_back(a.At(index));
  }
  return groups;
}

// How many elements fold into each result element.
int64_t ReducedCount(const Shape& shape, const std::vector<int64_t>& dims) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = dims.empty() ||
                         std::count(dims.begin(), dims.end(), d) > 0 ||
                         std::count(dims.begin(), dims.end(), d - rank) > 0;
    if (reduced) count *= shape[d];
  }
  return count;
}

double ReferenceSum(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum;
}

double ReferenceMean(const std::vector<double>& v) {
  return ReferenceSum(v) / static_cast<double>(v.size());
}

double ReferenceSumOfSquares(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return sum;
}

double ReferenceVar(const std::vector<double>& v, int64_t correction) {
  const double mean = ReferenceMean(v);
  double squares = 0;
  for (double x : v) squares += (x - mean) * (x - mean);
  return squares /
         std::max<double>(static_cast<double>(v.size()) - correction, 0.0);
}

double ReferenceMax(const std::vector<double>& v) {
  double best = v[0];
  for (double x : v) {
    if (std::isnan(x)) return x;
    best = std::max(best, x);
  }
  return best;
}

double ReferenceMin(const std::vector<double>& v) {
  double best = v[0];
  for (double x : v) {
    if (std::isnan(x)) return x;
    best = std::min(best, x);
  }
  return best;
}

// Index of the first maximum, NaN counting as greatest.
double ReferenceArgmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] > v[best]) best = i;
  }
  return static_cast<double>(best);
}

std::vector<double> ApplyToGroups(const Groups& groups,
                                  double (*f)(const std::vector<double>&)) {
  std::vector<double> result;
  for (const std::vector<double>& group : groups.values) {
    result.push_back(f(group));
  }
  return result;
}

std::string Describe(absl::string_view op, DType dtype, const Tensor& a,
                     const std::string& layout,
                     const std::vector<int64_t>& dims, bool keepdim) {
  return absl::StrCat(op, " ", std::string(DTypeName(dtype)), " ",
                      ShapeToString(a.shape()), " ", layout, " dims [",
                      absl::StrJoin(dims, ", "), "] keepdim ", keepdim);
}

TEST(ReductionTest, SumMaxMinMatchReferenceOverShapesLayoutsAndDTypes) {
  std::mt19937 rng(2024);
  for (DType dtype : kAllDTypes) {
    for (int trial = 0; trial < 40; ++trial) {
      const Shape shape = RandomShape(rng);
      std::string layout;
      const Tensor a = RandomInput(shape, dtype, rng, &layout);
      const std::vector<int64_t> dims = RandomDims(a.dim(), rng);
      const bool keepdim = std::bernoulli_distribution(0.5)(rng);
      const Groups groups = GroupByResult(a, dims, keepdim);
      const bool empty_extent = ReducedCount(a.shape(), dims) == 0;

      const std::string sum_context =
          Describe("Sum", dtype, a, layout, dims, keepdim);
      absl::StatusOr<Tensor> sum = Sum(a, dims, keepdim);
      ASSERT_TRUE(sum.ok()) << sum_context << ": " << sum.status();
      EXPECT_EQ(sum->dtype(), IsFloatingPoint(dtype) ? dtype : DType::kI64)
          << sum_context;
      ExpectClose(*sum, groups.shape, ApplyToGroups(groups, ReferenceSum),
                  ToleranceFor(dtype), sum_context);

      for (bool max : {true, false}) {
        const std::string context =
            Describe(max ? "Max" : "Min", dtype, a, layout, dims, keepdim);
        absl::StatusOr<Tensor> result =
            max ? Max(a, dims, keepdim) : Min(a, dims, keepdim);
        if (empty_extent) {
          EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
              << context;
          continue;
        }
        ASSERT_TRUE(result.ok()) << context << ": " << result.status();
        EXPECT_EQ(result->dtype(), dtype) << context;
        ExpectClose(*result, groups.shape,
                    ApplyToGroups(groups, max ? ReferenceMax : ReferenceMin),
                    Tolerance{0, 0}, context);
      }
    }
  }
}

TEST(ReductionTest, MeanVarAndSumOfSquaresMatchReference) {
  std::mt19937 rng(7);
  for (DType dtype : kFloatDTypes) {
    for (int trial = 0; trial < 40; ++trial) {
      const Shape shape = RandomShape(rng);
      std::string layout;
      const Tensor a = RandomInput(shape, dtype, rng, &layout);
      const std::vector<int64_t> dims = RandomDims(a.dim(), rng);
      const bool keepdim = std::bernoulli_distribution(0.5)(rng);
      const Groups groups = GroupByResult(a, dims, keepdim);

      const std::string mean_context =
          Describe("Mean", dtype, a, layout, dims, keepdim);
      absl::StatusOr<Tensor> mean = Mean(a, dims, keepdim);
      ASSERT_TRUE(mean.ok()) << mean_context << ": " << mean.status();
      EXPECT_EQ(mean->dtype(), dtype) << mean_context;
      // The mean of nothing is NaN, as the reference's 0 / 0 gives.
      ExpectClose(*mean, groups.shape, ApplyToGroups(groups, ReferenceMean),
                  ToleranceFor(dtype), mean_context);

      for (int64_t correction : {0, 1, 2}) {
        const std::string context =
            absl::StrCat(Describe("Var", dtype, a, layout, dims, keepdim),
                         " correction ", correction);
        absl::StatusOr<Tensor> var = Var(a, dims, correction, keepdim);
        ASSERT_TRUE(var.ok()) << context << ": " << var.status();
        std::vector<double> expected;
        for (const std::vector<double>& group : groups.values) {
          expected.push_back(ReferenceVar(group, correction));
        }
        ExpectClose(*var, groups.shape, expected, ToleranceFor(dtype), context);
      }

      // f64 whatever the input; the inputs are exact in every dtype and the
      // sums in f64: tight.
      const std::string squares_context =
          Describe("SumOfSquares", dtype, a, layout, dims, keepdim);
      absl::StatusOr<Tensor> squares = SumOfSquares(a, dims, keepdim);
      ASSERT_TRUE(squares.ok()) << squares_context << ": " << squares.status();
      EXPECT_EQ(squares->dtype(), DType::kF64) << squares_context;
      ExpectClose(*squares, groups.shape,
                  ApplyToGroups(groups, ReferenceSumOfSquares),
                  Tolerance{1e-12, 1e-12}, squares_context);
    }
  }
}

TEST(ReductionTest, ArgmaxMatchesReferenceOverShapesLayoutsAndDTypes) {
  std::mt19937 rng(11);
  for (DType dtype : kAllDTypes) {
    for (int trial = 0; trial < 40; ++trial) {
      Shape shape = RandomShape(rng);
      if (shape.empty()) shape = {5};
      std::string layout;
      const Tensor a = RandomInput(shape, dtype, rng, &layout);
      const int64_t rank = a.dim();
      int64_t dim = std::uniform_int_distribution<int64_t>(0, rank - 1)(rng);
      if (std::bernoulli_distribution(0.5)(rng)) dim -= rank;
      const bool keepdim = std::bernoulli_distribution(0.5)(rng);
      const std::string context =
          Describe("Argmax", dtype, a, layout, {dim}, keepdim);
      absl::StatusOr<Tensor> result = Argmax(a, dim, keepdim);
      if (a.shape()[(dim + rank) % rank] == 0) {
        EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
            << context;
        continue;
      }
      ASSERT_TRUE(result.ok()) << context << ": " << result.status();
      EXPECT_EQ(result->dtype(), DType::kI64) << context;
      const Groups groups = GroupByResult(a, {dim}, keepdim);
      ExpectClose(*result, groups.shape, ApplyToGroups(groups, ReferenceArgmax),
                  Tolerance{0, 0}, context);
    }
  }
}

TEST(ReductionTest, LongInnerAndOuterReductions) {
  // Long contiguous runs (the unrolled fold) and outer-dim reductions (the
  // accumulate-a-row loop), each against a plain double loop.
  std::mt19937 rng(3);
  const int64_t rows = 37, cols = 1029;
  const Tensor a =
      RandomTensor({rows, cols}, DType::kF32, Layout::kContiguous, rng);
  for (int64_t dim : {0, 1}) {
    absl::StatusOr<Tensor> sum = Sum(a, {dim});
    absl::StatusOr<Tensor> max = Max(a, {dim});
    absl::StatusOr<Tensor> argmax = Argmax(a, dim);
    absl::StatusOr<Tensor> var = Var(a, {dim});
    ASSERT_TRUE(sum.ok() && max.ok() && argmax.ok() && var.ok());
    const int64_t outer = dim == 0 ? cols : rows;
    const int64_t inner = dim == 0 ? rows : cols;
    std::vector<double> expected_sum(outer, 0), expected_max(outer),
        expected_argmax(outer, 0), expected_var(outer, 0);
    for (int64_t o = 0; o < outer; ++o) {
      std::vector<double> v;
      for (int64_t i = 0; i < inner; ++i) {
        v.push_back(dim == 0 ? a.At({i, o}) : a.At({o, i}));
      }
      expected_sum[o] = ReferenceSum(v);
      expected_max[o] = ReferenceMax(v);
      expected_argmax[o] = ReferenceArgmax(v);
      expected_var[o] = ReferenceVar(v, 1);
    }
    const std::string context = absl::StrCat("dim ", dim);
    ExpectClose(*sum, {outer}, expected_sum, ToleranceFor(DType::kF32),
                context);
    ExpectClose(*max, {outer}, expected_max, Tolerance{0, 0}, context);
    ExpectClose(*argmax, {outer}, expected_argmax, Tolerance{0, 0}, context);
    ExpectClose(*var, {outer}, expected_var, ToleranceFor(DType::kF32),
                context);
  }
}

TEST(ReductionTest, DefaultsReduceEverythingToZeroDim) {
  const Tensor a =
      Tensor::FromVector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).value();
  ExpectClose(Sum(a).value(), {}, {21}, ToleranceFor(DType::kF64));
  ExpectClose(Mean(a).value(), {}, {3.5}, ToleranceFor(DType::kF64));
  ExpectClose(Max(a).value(), {}, {6}, Tolerance{0, 0});
  ExpectClose(Min(a).value(), {}, {1}, Tolerance{0, 0});
  ExpectClose(Var(a).value(), {}, {3.5}, ToleranceFor(DType::kF64));
  ExpectClose(Sum(a, {}, /*keepdim=*/true).value(), {1, 1}, {21},
              ToleranceFor(DType::kF64));
}

TEST(ReductionTest, ZeroDimInputs) {
  const Tensor a = Tensor::Scalar(2.5, DType::kF32);
  ExpectClose(Sum(a).value(), {}, {2.5}, Tolerance{0, 0});
  ExpectClose(Sum(a, {0}).value(), {}, {2.5}, Tolerance{0, 0});
  ExpectClose(Max(a, {-1}, true).value(), {}, {2.5}, Tolerance{0, 0});
  ExpectClose(Argmax(a, 0).value(), {}, {0}, Tolerance{0, 0});
  // One element has no unbiased variance.
  EXPECT_TRUE(std::isnan(Var(a).value().At({})));
  ExpectClose(Var(a, {}, 0).value(), {}, {0}, Tolerance{0, 0});
}

TEST(ReductionTest, EmptyExtents) {
  const Tensor a = Tensor::Zeros({0, 3}, DType::kF32).value();
  ExpectClose(Sum(a, {0}).value(), {3}, {0, 0, 0}, Tolerance{0, 0});
  ExpectClose(Mean(a, {0}).value(), {3}, {kNan, kNan, kNan}, Tolerance{0, 0});
  ExpectClose(Var(a, {0}).value(), {3}, {kNan, kNan, kNan}, Tolerance{0, 0});
  // Reducing the non-empty dim of an empty tensor leaves an empty result.
  ExpectClose(Max(a, {1}).value(), {0}, {}, Tolerance{0, 0});
  ExpectClose(Argmax(a, 1).value(), {0}, {}, Tolerance{0, 0});
  ExpectClose(Sum(Tensor::Zeros({0}, DType::kI32).value()).value(), {}, {0},
              Tolerance{0, 0});
}

TEST(ReductionTest, NanPropagatesThroughMaxMinAndArgmax) {
  for (DType dtype : kFloatDTypes) {
    const Tensor a =
        Tensor::FromVector<double>({1, kNan, 5, kNan, 2, 3}, {2, 3})
            .value()
            .To(dtype)
            .value();
    const std::string context(DTypeName(dtype));
    ExpectClose(Max(a, {1}).value(), {2}, {kNan, kNan}, Tolerance{0, 0},
                context);
    ExpectClose(Min(a, {0}).value(), {3}, {kNan, kNan, 3}, Tolerance{0, 0},
                context);
    ExpectClose(Argmax(a, 1).value(), {2}, {1, 0}, Tolerance{0, 0}, context);
    ExpectClose(Argmax(a, 0).value(), {3}, {1, 0, 0}, Tolerance{0, 0}, context);
  }
}

TEST(ReductionTest, IntegerSumsAccumulateInI64) {
  constexpr int32_t kBig = 1 << 30;
  const Tensor a =
      Tensor::FromVector<int32_t>({kBig, kBig, kBig, -1}, {4}).value();
  absl::StatusOr<Tensor> sum = Sum(a);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->dtype(), DType::kI64);
  EXPECT_EQ(sum->ToVector<int64_t>().value(),
            (std::vector<int64_t>{3 * int64_t{kBig} - 1}));
  const Tensor flags =
      Tensor::FromVector<bool>({true, false, true, true}, {2, 2}).value();
  EXPECT_EQ(Sum(flags, {1}).value().ToVector<int64_t>().value(),
            (std::vector<int64_t>{1, 2}));
}

// ---- Bad input. ----

TEST(ReductionErrorsTest, BadDimNamesTheDimAndRank) {
  const Tensor a = Tensor::Zeros({2, 3}, DType::kF32).value();
  const std::vector<std::pair<std::string, absl::StatusOr<Tensor>>> results = {
      {"Sum", Sum(a, {2})},  {"Mean", Mean(a, {-3})}, {"Max", Max(a, {0, 5})},
      {"Min", Min(a, {-4})}, {"Var", Var(a, {7})},    {"Argmax", Argmax(a, 4)},
  };
  const std::vector<int64_t> bad_dims = {2, -3, 5, -4, 7, 4};
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& [name, result] = results[i];
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_THAT(
        result.status().message(),
        AllOf(HasSubstr(name), HasSubstr(absl::StrCat("dim ", bad_dims[i])),
              HasSubstr("rank 2")));
  }
}

TEST(ReductionErrorsTest, RepeatedDims) {
  const Tensor a = Tensor::Zeros({2, 3}, DType::kF32).value();
  absl::StatusOr<Tensor> result = Sum(a, {1, -1});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("-1"), HasSubstr("[1, -1]")));
}

TEST(ReductionErrorsTest, MeanVarAndSumOfSquaresNeedFloatingDTypes) {
  const Tensor a = Tensor::Zeros({2}, DType::kI32).value();
  for (const absl::StatusOr<Tensor>& result :
       {Mean(a), Var(a), SumOfSquares(a)}) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("i32"));
  }
}

TEST(ReductionErrorsTest, MaxMinArgmaxOfAnEmptyExtent) {
  const Tensor a = Tensor::Zeros({0, 3}, DType::kF32).value();
  for (const absl::StatusOr<Tensor>& result :
       {Max(a, {0}), Min(a), Argmax(a, 0)}) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(),
                AllOf(HasSubstr("[0, 3]"), HasSubstr("empty")));
  }
}

TEST(ReductionErrorsTest, UndefinedTensor) {
  for (const absl::StatusOr<Tensor>& result :
       {Sum(Tensor()), Mean(Tensor()), Argmax(Tensor(), 0)}) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("undefined"));
  }
}

}  // namespace
}  // namespace dtensor
