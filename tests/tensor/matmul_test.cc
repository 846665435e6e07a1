#include "dtensor/tensor/matmul.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
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
using ::dtensor::testing::Ravel;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::dtensor::testing::Unravel;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::vector<Layout> kLayouts = {Layout::kContiguous, Layout::kTransposed,
                                      Layout::kStrided};

struct Expected {
  Shape shape;
  std::vector<double> values;
};

// torch.matmul in double, written from its definition: 1-D operands become a
// row (left) or column (right) vector whose dim is dropped afterwards, and
// the batch dims (all but the last two) broadcast right-aligned.
Expected ReferenceMatmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.ToVector<double>().value();
  const std::vector<double> bv = b.ToVector<double>().value();
  Shape as = a.shape();
  Shape bs = b.shape();
  if (a.dim() == 1) as.insert(as.begin(), 1);
  if (b.dim() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2];
  const int64_t k = as[as.size() - 1];
  const int64_t n = bs[bs.size() - 1];
  const Shape a_batch(as.begin(), as.end() - 2);
  const Shape b_batch(bs.begin(), bs.end() - 2);
  const size_t batch_rank = std::max(a_batch.size(), b_batch.size());
  // Batch dims left-padded with 1s to a common rank.
  Shape a_padded(batch_rank - a_batch.size(), 1);
  a_padded.insert(a_padded.end(), a_batch.begin(), a_batch.end());
  Shape b_padded(batch_rank - b_batch.size(), 1);
  b_padded.insert(b_padded.end(), b_batch.begin(), b_batch.end());
  Shape batch(batch_rank);
  for (size_t d = 0; d < batch_rank; ++d) {
    batch[d] = a_padded[d] == 1 ? b_padded[d] : a_padded[d];
  }
  Expected result;
  result.shape = batch;
  if (a.dim() > 1) result.shape.push_back(m);
  if (b.dim() > 1) result.shape.push_back(n);
  for (int64_t p = 0; p < NumElements(batch); ++p) {
    const std::vector<int64_t> index = Unravel(p, batch);
    std::vector<int64_t> a_index(batch_rank), b_index(batch_rank);
    for (size_t d = 0; d < batch_rank; ++d) {
      a_index[d] = a_padded[d] == 1 ? 0 : index[d];
      b_index[d] = b_padded[d] == 1 ? 0 : index[d];
    }
    const int64_t a_base = Ravel(a_index, a_padded) * m * k;
    const int64_t b_base = Ravel(b_index, b_padded) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += av[a_base + i * k + l] * bv[b_base + l * n + j];
        }
        result.values.push_back(sum);
      }
    }
  }
  return result;
}

// Tolerance for sums of `k` products of values in [-1, 1].
Tolerance MatmulTolerance(DType dtype, int64_t k) {
  Tolerance tolerance = ToleranceFor(dtype);
  tolerance.atol *= std::max<int64_t>(k, 1);
  return tolerance;
}

TEST(MatmulTest, RandomShapesBatchesLayoutsAndDTypes) {
  std::mt19937 rng(1234);
  const std::vector<int64_t> sizes = {0, 1, 1, 2, 3, 5, 8, 13};
  for (int trial = 0; trial < 400; ++trial) {
    const DType dtype = Pick(kFloatDTypes, rng);
    const int64_t m = Pick(sizes, rng);
    const int64_t k = Pick(sizes, rng);
    const int64_t n = Pick(sizes, rng);
    const int a_rank = std::uniform_int_distribution<int>(1, 4)(rng);
    const int b_rank = std::uniform_int_distribution<int>(1, 4)(rng);
    // A common batch shape; each operand takes its trailing dims, some of
    // them broadcast as size 1.
    Shape batch;
    for (int d = 0; d < std::max(a_rank, b_rank) - 2; ++d) {
      batch.push_back(Pick<int64_t>({1, 2, 3}, rng));
    }
    const auto operand_shape = [&](int rank, int64_t rows, int64_t cols) {
      Shape shape;
      for (int d = 0; d < rank - 2; ++d) {
        const int64_t size = batch[batch.size() - (rank - 2) + d];
        shape.push_back(Pick<int64_t>({size, size, 1}, rng));
      }
      if (rank >= 2) shape.push_back(rows);
      shape.push_back(cols);
      return shape;
    };
    const Shape a_shape = a_rank == 1 ? Shape{k} : operand_shape(a_rank, m, k);
    const Shape b_shape = b_rank == 1 ? Shape{k} : operand_shape(b_rank, k, n);
    const Layout a_layout = Pick(kLayouts, rng);
    const Layout b_layout = Pick(kLayouts, rng);
    const Tensor a = RandomTensor(a_shape, dtype, a_layout, rng);
    const Tensor b = RandomTensor(b_shape, dtype, b_layout, rng);
    const std::string context =
        absl::StrCat("trial ", trial, ": ", ShapeToString(a_shape), " (",
                     LayoutName(a_layout), ") @ ", ShapeToString(b_shape), " (",
                     LayoutName(b_layout), ") ", std::string(DTypeName(dtype)));
    absl::StatusOr<Tensor> result = Matmul(a, b);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    EXPECT_EQ(result->dtype(), dtype) << context;
    const Expected expected = ReferenceMatmul(a, b);
    ExpectClose(*result, expected.shape, expected.values,
                MatmulTolerance(dtype, k), context);
  }
}

TEST(MatmulTest, EmptyInnerDimGivesZeros) {
  for (const DType dtype : kFloatDTypes) {
    const Tensor a = Tensor::Ones({2, 3, 0}, dtype).value();
    const Tensor b = Tensor::Ones({0, 4}, dtype).value();
    absl::StatusOr<Tensor> result = Matmul(a, b);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectClose(*result, {2, 3, 4}, std::vector<double>(24, 0.0),
                ToleranceFor(dtype), std::string(DTypeName(dtype)));
  }
}

TEST(MatmulTest, VectorDotVectorIsZeroDim) {
  const Tensor a = Tensor::FromVector<double>({1, 2, 3}, {3}).value();
  const Tensor b = Tensor::FromVector<double>({4, -5, 6}, {3}).value();
  absl::StatusOr<Tensor> result = Matmul(a, b);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectClose(*result, {}, {4 - 10 + 18}, ToleranceFor(DType::kF64));
}

TEST(MatmulTest, ExpandedOperands) {
  std::mt19937 rng(7);
  for (const DType dtype : kFloatDTypes) {
    // b broadcast over the batch through a stride-0 dim; a with stride-0 rows
    // (every row the same), which BLAS cannot read in place.
    const Tensor b = RandomTensor({1, 5, 6}, dtype, Layout::kContiguous, rng)
                         .Expand({4, 5, 6})
                         .value();
    const Tensor a = RandomTensor({4, 1, 5}, dtype, Layout::kStrided, rng)
                         .Expand({4, 3, 5})
                         .value();
    absl::StatusOr<Tensor> result = Matmul(a, b);
    ASSERT_TRUE(result.ok()) << result.status();
    const Expected expected = ReferenceMatmul(a, b);
    ExpectClose(*result, expected.shape, expected.values,
                MatmulTolerance(dtype, 5), std::string(DTypeName(dtype)));
  }
}

TEST(MatmulTest, LargerThreadedProductsAndSharedWeight) {
  std::mt19937 rng(99);
  // Big enough for OpenBLAS to split the work across threads; the 3-D @ 2-D
  // case folds the batch into the rows, the transposed one cannot.
  for (const Layout layout : kLayouts) {
    const Tensor a = RandomTensor({3, 67, 45}, DType::kF32, layout, rng);
    const Tensor b = RandomTensor({45, 71}, DType::kF32, layout, rng);
    absl::StatusOr<Tensor> result = Matmul(a, b);
    ASSERT_TRUE(result.ok()) << result.status();
    const Expected expected = ReferenceMatmul(a, b);
    ExpectClose(*result, expected.shape, expected.values,
                MatmulTolerance(DType::kF32, 45), LayoutName(layout));
  }
}

// a @ weight^T + bias in double.
Expected ReferenceLinear(const Tensor& a, const Tensor& weight,
                         const Tensor& bias) {
  const std::vector<double> av = a.ToVector<double>().value();
  const std::vector<double> wv = weight.ToVector<double>().value();
  const std::vector<double> bv = bias.defined()
                                     ? bias.ToVector<double>().value()
                                     : std::vector<double>(weight.size(0), 0.0);
  const int64_t in = weight.size(1);
  const int64_t out = weight.size(0);
  Expected result;
  result.shape = a.shape();
  result.shape.back() = out;
  const int64_t rows =
      NumElements(absl::MakeConstSpan(a.shape()).subspan(0, a.dim() - 1));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = bv[o];
      for (int64_t i = 0; i < in; ++i) sum += av[r * in + i] * wv[o * in + i];
      result.values.push_back(sum);
    }
  }
  return result;
}

TEST(LinearTest, RandomShapesWithAndWithoutBias) {
  std::mt19937 rng(42);
  const std::vector<int64_t> sizes = {0, 1, 2, 3, 7, 16};
  for (int trial = 0; trial < 150; ++trial) {
    const DType dtype = Pick(kFloatDTypes, rng);
    const int64_t in = Pick(sizes, rng);
    const int64_t out = Pick(sizes, rng);
    Shape a_shape;
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int d = 0; d < rank - 1; ++d) a_shape.push_back(Pick(sizes, rng));
    a_shape.push_back(in);
    const Tensor a = RandomTensor(a_shape, dtype, Pick(kLayouts, rng), rng);
    const Tensor weight =
        RandomTensor({out, in}, dtype, Pick(kLayouts, rng), rng);
    const Tensor bias =
        trial % 2 == 0 ? RandomTensor({out}, dtype, Pick(kLayouts, rng), rng)
                       : Tensor();
    const std::string context = absl::StrCat(
        "trial ", trial, ": ", ShapeToString(a_shape), " x ",
        ShapeToString(weight.shape()), bias.defined() ? " + bias" : "", " ",
        std::string(DTypeName(dtype)));
    absl::StatusOr<Tensor> result = Linear(a, weight, bias);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    const Expected expected = ReferenceLinear(a, weight, bias);
    ExpectClose(*result, expected.shape, expected.values,
                MatmulTolerance(dtype, in + 1), context);
  }
}

TEST(MatmulErrorsTest, ShapeMismatchNamesBothShapes) {
  const Tensor a = Tensor::Zeros({2, 3}, DType::kF32).value();
  const Tensor b = Tensor::Zeros({4, 5}, DType::kF32).value();
  absl::StatusOr<Tensor> result = Matmul(a, b);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("[2, 3]"), HasSubstr("[4, 5]")));
}

TEST(MatmulErrorsTest, BatchDimsThatDoNotBroadcast) {
  const Tensor a = Tensor::Zeros({2, 3, 4}, DType::kF32).value();
  const Tensor b = Tensor::Zeros({3, 4, 5}, DType::kF32).value();
  absl::StatusOr<Tensor> result = Matmul(a, b);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("[2, 3, 4]"), HasSubstr("[3, 4, 5]")));
}

TEST(MatmulErrorsTest, BadDTypes) {
  const Tensor i32 = Tensor::Zeros({2, 2}, DType::kI32).value();
  absl::StatusOr<Tensor> result = Matmul(i32, i32);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("i32"));

  const Tensor f32 = Tensor::Zeros({2, 2}, DType::kF32).value();
  const Tensor f64 = Tensor::Zeros({2, 2}, DType::kF64).value();
  result = Matmul(f32, f64);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("f32"), HasSubstr("f64")));
}

TEST(MatmulErrorsTest, ZeroDimAndUndefinedOperands) {
  const Tensor scalar = Tensor::Scalar(2.0);
  const Tensor vector = Tensor::Zeros({3}, DType::kF32).value();
  absl::StatusOr<Tensor> result = Matmul(scalar, vector);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("[]"));

  result = Matmul(Tensor(), vector);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("undefined"));
}

TEST(LinearErrorsTest, MismatchedWeightAndBias) {
  const Tensor a = Tensor::Zeros({2, 3}, DType::kF32).value();
  const Tensor weight = Tensor::Zeros({4, 5}, DType::kF32).value();
  absl::StatusOr<Tensor> result = Linear(a, weight, Tensor());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("[2, 3]"), HasSubstr("[4, 5]")));

  const Tensor good_weight = Tensor::Zeros({4, 3}, DType::kF32).value();
  const Tensor bias = Tensor::Zeros({5}, DType::kF32).value();
  result = Linear(a, good_weight, bias);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("[5]"), HasSubstr("[4, 3]")));

  const Tensor f64_bias = Tensor::Zeros({4}, DType::kF64).value();
  result = Linear(a, good_weight, f64_bias);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("f32"), HasSubstr("f64")));
}

}  // namespace
}  // namespace dtensor
