#include "dtensor/tensor/indexing.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::ExpectInvalidArgument;
using ::dtensor::testing::kAllDTypes;
using ::dtensor::testing::kLayouts;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Ravel;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::dtensor::testing::Unravel;

const std::vector<DType> kIndexDTypes = {DType::kI32, DType::kI64};

// Random values of `dtype`: floats in [-1, 1), integers in [-50, 50].
Tensor RandomValues(const Shape& shape, DType dtype, std::mt19937& rng) {
  const bool floating = IsFloatingPoint(dtype);
  return RandomTensor(shape, dtype, Pick(kLayouts, rng), rng,
                      floating ? -1 : -50, floating ? 1 : 50);
}

// Random indices in [0, bound) of a random index dtype, contiguous or every
// other element of a longer tensor (for 1-D shapes).
Tensor RandomIndexTensor(const Shape& shape, int64_t bound, std::mt19937& rng) {
  const DType dtype = Pick(kIndexDTypes, rng);
  if (shape.size() == 1 && std::bernoulli_distribution(0.5)(rng)) {
    return RandomIndices({2 * shape[0]}, bound, dtype, rng)
        .Slice(0, 0, 2 * shape[0], 2)
        .value();
  }
  return RandomIndices(shape, bound, dtype, rng);
}

// An index shape for Gather/ScatterAdd on `x` along `dim`: no larger than x
// off `dim`, any small size along it (0 when x has nothing to pick).
Shape RandomGatherShape(const Shape& x_shape, int64_t dim, std::mt19937& rng) {
  Shape shape;
  for (int64_t d = 0; d < static_cast<int64_t>(x_shape.size()); ++d) {
    const int64_t limit = d == dim ? (x_shape[d] == 0 ? 0 : 4) : x_shape[d];
    shape.push_back(std::uniform_int_distribution<int64_t>(0, limit)(rng));
  }
  return shape;
}

TEST(IndexSelectTest, RandomShapesDimsAndDTypes) {
  std::mt19937 rng(101);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d)
      shape.push_back(Pick<int64_t>({0, 1, 2, 3, 5}, rng));
    const int64_t dim =
        std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    const int64_t d = dim < 0 ? dim + rank : dim;
    const DType dtype = Pick(kAllDTypes, rng);
    const Tensor x = RandomValues(shape, dtype, rng);
    const int64_t count = shape[d] == 0 ? 0 : Pick<int64_t>({0, 1, 3, 6}, rng);
    const Tensor index = RandomIndexTensor({count}, shape[d], rng);
    const std::string context =
        absl::StrCat("trial ", trial, ": x ", ShapeToString(shape), " dim ",
                     dim, " ", std::string(DTypeName(dtype)), " index ", count);
    absl::StatusOr<Tensor> result = IndexSelect(x, dim, index);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    EXPECT_EQ(result->dtype(), dtype) << context;
    const std::vector<double> values = x.ToVector<double>().value();
    const std::vector<int64_t> picks = index.ToVector<int64_t>().value();
    Shape out_shape = shape;
    out_shape[d] = count;
    std::vector<double> expected;
    for (int64_t p = 0; p < NumElements(out_shape); ++p) {
      std::vector<int64_t> position = Unravel(p, out_shape);
      position[d] = picks[position[d]];
      expected.push_back(values[Ravel(position, shape)]);
    }
    ExpectClose(*result, out_shape, expected, {0, 0}, context);
  }
}

TEST(IndexSelectTest, BadInputs) {
  const Tensor x = Tensor::Zeros({3, 5}, DType::kF32).value();
  ExpectInvalidArgument(
      IndexSelect(x, 1, Tensor::FromVector<int64_t>({0, 7}, {2}).value()),
      {"7", "5"});
  ExpectInvalidArgument(
      IndexSelect(x, 0, Tensor::FromVector<int32_t>({-1}, {1}).value()),
      {"-1", "3"});
  ExpectInvalidArgument(
      IndexSelect(x, 0, Tensor::FromVector<float>({0}, {1}).value()), {"f32"});
  ExpectInvalidArgument(
      IndexSelect(x, 0, Tensor::FromVector<int64_t>({0, 1}, {1, 2}).value()),
      {"[1, 2]"});
  ExpectInvalidArgument(
      IndexSelect(x, 3, Tensor::FromVector<int64_t>({0}, {1}).value()), {"3"});
}

TEST(GatherTest, RandomShapesDimsAndDTypes) {
  std::mt19937 rng(202);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d)
      shape.push_back(Pick<int64_t>({0, 1, 2, 4}, rng));
    const int64_t dim =
        std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    const int64_t d = dim < 0 ? dim + rank : dim;
    const DType dtype = Pick(kAllDTypes, rng);
    const Tensor x = RandomValues(shape, dtype, rng);
    const Shape index_shape = RandomGatherShape(shape, d, rng);
    const Tensor index = RandomIndexTensor(index_shape, shape[d], rng);
    const std::string context = absl::StrCat(
        "trial ", trial, ": x ", ShapeToString(shape), " dim ", dim, " ",
        std::string(DTypeName(dtype)), " index ", ShapeToString(index_shape));
    absl::StatusOr<Tensor> result = Gather(x, dim, index);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    const std::vector<double> values = x.ToVector<double>().value();
    const std::vector<int64_t> picks = index.ToVector<int64_t>().value();
    std::vector<double> expected;
    for (int64_t p = 0; p < NumElements(index_shape); ++p) {
      std::vector<int64_t> position = Unravel(p, index_shape);
      position[d] = picks[p];
      expected.push_back(values[Ravel(position, shape)]);
    }
    ExpectClose(*result, index_shape, expected, {0, 0}, context);
  }
}

TEST(GatherTest, BadInputs) {
  const Tensor x = Tensor::Zeros({3, 4}, DType::kF32).value();
  ExpectInvalidArgument(
      Gather(x, 1, Tensor::FromVector<int64_t>({0, 9}, {1, 2}).value()),
      {"9", "4"});
  ExpectInvalidArgument(
      Gather(x, 1, Tensor::FromVector<int64_t>({0, 1}, {2}).value()),
      {"[2]", "[3, 4]"});
  ExpectInvalidArgument(
      Gather(x, 1, Tensor::Zeros({4, 1}, DType::kI64).value()),
      {"[4, 1]", "[3, 4]"});
  ExpectInvalidArgument(
      Gather(x, 0, Tensor::Zeros({1, 1}, DType::kBool).value()), {"bool"});
}

TEST(ScatterAddTest, RandomShapesDuplicatesAndDTypes) {
  std::mt19937 rng(303);
  const std::vector<DType> dtypes = {DType::kF32, DType::kF64, DType::kBF16,
                                     DType::kF16, DType::kI32, DType::kI64};
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d)
      shape.push_back(Pick<int64_t>({0, 1, 2, 4}, rng));
    const int64_t dim =
        std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    const int64_t d = dim < 0 ? dim + rank : dim;
    const DType dtype = Pick(dtypes, rng);
    const Tensor x = RandomValues(shape, dtype, rng);
    const Shape index_shape = RandomGatherShape(shape, d, rng);
    // src may be larger than the index on every dim; the excess is unused.
    Shape src_shape = index_shape;
    for (int64_t& size : src_shape) size += Pick<int64_t>({0, 0, 1}, rng);
    const Tensor src = RandomValues(src_shape, dtype, rng);
    const Tensor index = RandomIndexTensor(index_shape, shape[d], rng);
    const std::string context = absl::StrCat(
        "trial ", trial, ": x ", ShapeToString(shape), " dim ", dim, " ",
        std::string(DTypeName(dtype)), " index ", ShapeToString(index_shape),
        " src ", ShapeToString(src_shape));
    absl::StatusOr<Tensor> result = ScatterAdd(x, dim, index, src);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    std::vector<double> expected = x.ToVector<double>().value();
    const std::vector<double> addends = src.ToVector<double>().value();
    const std::vector<int64_t> targets = index.ToVector<int64_t>().value();
    for (int64_t p = 0; p < NumElements(index_shape); ++p) {
      std::vector<int64_t> position = Unravel(p, index_shape);
      const double addend = addends[Ravel(position, src_shape)];
      position[d] = targets[p];
      expected[Ravel(position, shape)] += addend;
    }
    // Up to 4 duplicates add with a rounding each in the 16-bit dtypes.
    Tolerance tolerance = ToleranceFor(dtype);
    tolerance.atol *= 4;
    ExpectClose(*result, shape, expected, tolerance, context);
  }
}

TEST(ScatterAddTest, LeavesInputUntouched) {
  const Tensor x = Tensor::Zeros({3}, DType::kF32).value();
  const Tensor index = Tensor::FromVector<int64_t>({2, 2, 0}, {3}).value();
  const Tensor src = Tensor::FromVector<float>({1, 2, 4}, {3}).value();
  ExpectClose(ScatterAdd(x, 0, index, src).value(), {3}, {4, 0, 3}, {0, 0});
  ExpectClose(x, {3}, {0, 0, 0}, {0, 0});
}

TEST(ScatterAddTest, BadInputs) {
  const Tensor x = Tensor::Zeros({3, 4}, DType::kF32).value();
  const Tensor src = Tensor::Zeros({3, 4}, DType::kF32).value();
  ExpectInvalidArgument(
      ScatterAdd(x, 0, Tensor::FromVector<int32_t>({3}, {1, 1}).value(), src),
      {"3"});
  ExpectInvalidArgument(
      ScatterAdd(x, 0, Tensor::Zeros({2, 2}, DType::kI64).value(),
                 Tensor::Zeros({1, 2}, DType::kF32).value()),
      {"[2, 2]", "[1, 2]"});
  ExpectInvalidArgument(
      ScatterAdd(x, 0, Tensor::Zeros({1, 1}, DType::kI64).value(),
                 Tensor::Zeros({3, 4}, DType::kI64).value()),
      {"f32", "i64"});
  ExpectInvalidArgument(ScatterAdd(Tensor::Zeros({2}, DType::kBool).value(), 0,
                                   Tensor::Zeros({1}, DType::kI64).value(),
                                   Tensor::Zeros({2}, DType::kBool).value()),
                        {"bool"});
}

}  // namespace
}  // namespace dtensor
