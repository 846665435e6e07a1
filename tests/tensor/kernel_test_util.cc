#include "tests/tensor/kernel_test_util.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/elementwise.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor::testing {
namespace {

// A contiguous tensor of `shape` filled as RandomTensor describes.
Tensor RandomContiguous(const Shape& shape, DType dtype, std::mt19937& rng,
                        double low, double high) {
  std::vector<double> values(NumElements(shape));
  if (IsFloatingPoint(dtype)) {
    std::uniform_real_distribution<double> dist(low, high);
    for (double& value : values) value = dist(rng);
  } else if (dtype == DType::kBool) {
    std::bernoulli_distribution dist(0.5);
    for (double& value : values) value = dist(rng);
  } else {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(low),
                                                static_cast<int64_t>(high));
    for (double& value : values) value = static_cast<double>(dist(rng));
  }
  return Tensor::FromVector<double>(values, shape).value().To(dtype).value();
}

}  // namespace

const std::vector<std::pair<std::string, BinaryFn>>& BinaryElementwiseOps() {
  static const auto* ops = new std::vector<std::pair<std::string, BinaryFn>>{
      {"Add", Add},         {"Sub", Sub},
      {"Mul", Mul},         {"Div", Div},
      {"Pow", Pow},         {"Maximum", Maximum},
      {"Minimum", Minimum}, {"Eq", Eq},
      {"Ne", Ne},           {"Lt", Lt},
      {"Le", Le},           {"Gt", Gt},
      {"Ge", Ge},           {"SiluBackward", SiluBackward}};
  return *ops;
}

std::string LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kTransposed:
      return "transposed";
    case Layout::kStrided:
      return "strided";
  }
  return "unknown";
}

Tensor RandomTensor(const Shape& shape, DType dtype, Layout layout,
                    std::mt19937& rng, double low, double high) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (layout == Layout::kTransposed && rank < 2) layout = Layout::kStrided;
  if (rank == 0) layout = Layout::kContiguous;
  switch (layout) {
    case Layout::kContiguous:
      return RandomContiguous(shape, dtype, rng, low, high);
    case Layout::kTransposed: {
      Shape base = shape;
      std::swap(base[rank - 1], base[rank - 2]);
      return RandomContiguous(base, dtype, rng, low, high)
          .Transpose(-1, -2)
          .value();
    }
    case Layout::kStrided: {
      Shape base = shape;
      base[rank - 1] *= 2;
      return RandomContiguous(base, dtype, rng, low, high)
          .Slice(-1, 0, base[rank - 1], 2)
          .value();
    }
  }
  return Tensor();
}

Tensor RandomIndices(const Shape& shape, int64_t bound, DType dtype,
                     std::mt19937& rng) {
  return RandomContiguous(shape, dtype, rng, 0, static_cast<double>(bound - 1));
}

Shape RandomShape(int rank, const std::vector<int64_t>& sizes,
                  std::mt19937& rng) {
  Shape shape;
  for (int d = 0; d < rank; ++d) shape.push_back(Pick(sizes, rng));
  return shape;
}

std::vector<int64_t> Unravel(int64_t linear, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

int64_t Ravel(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t linear = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    linear = linear * shape[d] + index[d];
  }
  return linear;
}

Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return {1e-12, 1e-12};
    case DType::kF32:
      return {1e-5, 1e-5};
    case DType::kBF16:
      return {1e-2, 1e-2};
    case DType::kF16:
      return {2e-3, 2e-3};
    default:
      return {0, 0};
  }
}

void ExpectClose(const Tensor& actual, const Shape& shape,
                 const std::vector<double>& expected, Tolerance tolerance,
                 const std::string& context) {
  ASSERT_TRUE(actual.defined()) << context;
  ASSERT_EQ(actual.shape(), shape)
      << context << ": shape " << ShapeToString(actual.shape()) << ", expected "
      << ShapeToString(shape);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), NumElements(shape))
      << context;
  const std::vector<double> values = actual.ToVector<double>().value();
  int mismatches = 0;
  for (size_t i = 0; i < values.size() && mismatches < 5; ++i) {
    const double a = values[i];
    const double e = expected[i];
    const bool close =
        (std::isnan(a) && std::isnan(e)) || a == e ||
        (std::isfinite(e) &&
         std::abs(a - e) <= tolerance.atol + tolerance.rtol * std::abs(e));
    if (!close) {
      ++mismatches;
      ADD_FAILURE() << context << ": at "
                    << ShapeToString(Unravel(static_cast<int64_t>(i), shape))
                    << " got " << a << ", expected " << e << " (dtype "
                    << actual.dtype() << ")";
    }
  }
}

void ExpectInvalidArgument(const absl::StatusOr<Tensor>& result,
                           const std::vector<std::string>& fragments) {
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  for (const std::string& fragment : fragments) {
    EXPECT_THAT(result.status().message(), ::testing::HasSubstr(fragment));
  }
}

int64_t UlpDistance(float a, float b) {
  const auto ordinal = [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    const int64_t magnitude = bits & 0x7fffffffu;
    return std::signbit(v) ? -magnitude : magnitude;
  };
  return std::llabs(ordinal(a) - ordinal(b));
}

}  // namespace dtensor::testing
