#include "dtensor/tensor/nn_functional.h"

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
#include "absl/types/span.h"
#include "dtensor/tensor/rotary_tables.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::ExpectInvalidArgument;
using ::dtensor::testing::kFloatDTypes;
using ::dtensor::testing::kLayouts;
using ::dtensor::testing::Layout;
using ::dtensor::testing::LayoutName;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomShape;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Ravel;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::dtensor::testing::Unravel;

const std::vector<DType> kIndexDTypes = {DType::kI32, DType::kI64};
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Softmax and LogSoftmax. ----

// Softmax (or log-softmax) along `dim` in double, from the definition.
std::vector<double> ReferenceSoftmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> values = x.ToVector<double>().value();
  std::vector<double> result(values.size());
  if (x.dim() == 0) {
    result[0] = log ? 0.0 : 1.0;
    return result;
  }
  const Shape& shape = x.shape();
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  for (size_t p = 0; p < values.size(); ++p) {
    std::vector<int64_t> index = Unravel(static_cast<int64_t>(p), shape);
    double max = -kInf;
    for (index[d] = 0; index[d] < shape[d]; ++index[d]) {
      max = std::max(max, values[Ravel(index, shape)]);
    }
    double sum = 0;
    for (index[d] = 0; index[d] < shape[d]; ++index[d]) {
      sum += std::exp(values[Ravel(index, shape)] - max);
    }
    result[p] =
        log ? values[p] - max - std::log(sum) : std::exp(values[p] - max) / sum;
  }
  return result;
}

TEST(SoftmaxTest, RandomShapesDimsLayoutsAndDTypes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = std::uniform_int_distribution<int>(0, 4)(rng);
    const Shape shape = RandomShape(rank, {0, 1, 2, 3, 5, 8}, rng);
    const int64_t dim = std::uniform_int_distribution<int64_t>(
        -std::max(rank, 1), std::max(rank, 1) - 1)(rng);
    const DType dtype = Pick(kFloatDTypes, rng);
    const Layout layout = Pick(kLayouts, rng);
    const Tensor x = RandomTensor(shape, dtype, layout, rng, -4, 4);
    const std::string context = absl::StrCat(
        "trial ", trial, ": ", ShapeToString(shape), " dim ", dim, " ",
        std::string(DTypeName(dtype)), " ", LayoutName(layout));
    absl::StatusOr<Tensor> softmax = Softmax(x, dim);
    ASSERT_TRUE(softmax.ok()) << context << ": " << softmax.status();
    ExpectClose(*softmax, shape, ReferenceSoftmax(x, dim, false),
                ToleranceFor(dtype), context + " softmax");
    absl::StatusOr<Tensor> log_softmax = LogSoftmax(x, dim);
    ASSERT_TRUE(log_softmax.ok()) << context << ": " << log_softmax.status();
    ExpectClose(*log_softmax, shape, ReferenceSoftmax(x, dim, true),
                ToleranceFor(dtype), context + " log_softmax");
  }
}

TEST(SoftmaxTest, LargeAndInfiniteLogitsStayStable) {
  const Tensor x =
      Tensor::FromVector<double>(
          {1000, 1001, 1002, -1e4, -1e4 + 1, -1e4 + 2, -kInf, 0, 0}, {3, 3})
          .value()
          .To(DType::kF32)
          .value();
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  const std::vector<double> expected = {std::exp(-2.0) / z,
                                        std::exp(-1.0) / z,
                                        1 / z,
                                        std::exp(-2.0) / z,
                                        std::exp(-1.0) / z,
                                        1 / z,
                                        0,
                                        0.5,
                                        0.5};
  ExpectClose(Softmax(x, 1).value(), {3, 3}, expected,
              ToleranceFor(DType::kF32));
  const std::vector<double> expected_log = {
      -2 - std::log(z), -1 - std::log(z), -std::log(z), -2 - std::log(z),
      -1 - std::log(z), -std::log(z),     -kInf,        std::log(0.5),
      std::log(0.5)};
  ExpectClose(LogSoftmax(x, -1).value(), {3, 3}, expected_log,
              ToleranceFor(DType::kF32));
}

TEST(SoftmaxTest, BadInputs) {
  const Tensor ints = Tensor::Zeros({2, 3}, DType::kI64).value();
  ExpectInvalidArgument(Softmax(ints, 0), {"i64"});
  const Tensor x = Tensor::Zeros({2, 3}, DType::kF32).value();
  ExpectInvalidArgument(LogSoftmax(x, 5), {"5"});
}

// ---- RmsNorm and LayerNorm. ----

// The normalization of each last-dim row in double: rms or layer norm.
std::vector<double> ReferenceNorm(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias, double eps, bool rms) {
  const std::vector<double> values = x.ToVector<double>().value();
  const int64_t width = x.size(-1);
  const std::vector<double> w = weight.defined()
                                    ? weight.ToVector<double>().value()
                                    : std::vector<double>(width, 1.0);
  const std::vector<double> b = bias.defined()
                                    ? bias.ToVector<double>().value()
                                    : std::vector<double>(width, 0.0);
  std::vector<double> result(values.size());
  for (size_t start = 0; start < values.size(); start += width) {
    double mean = 0;
    if (!rms) {
      for (int64_t i = 0; i < width; ++i) mean += values[start + i] / width;
    }
    double second_moment = 0;
    for (int64_t i = 0; i < width; ++i) {
      const double centered = values[start + i] - mean;
      second_moment += centered * centered / width;
    }
    for (int64_t i = 0; i < width; ++i) {
      result[start + i] =
          (values[start + i] - mean) / std::sqrt(second_moment + eps) * w[i] +
          b[i];
    }
  }
  return result;
}

TEST(NormTest, RandomShapesParamsLayoutsAndDTypes) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    Shape shape = RandomShape(rank - 1, {0, 1, 2, 4}, rng);
    shape.push_back(Pick<int64_t>({0, 1, 2, 3, 8, 17}, rng));
    const int64_t width = shape.back();
    const DType dtype = Pick(kFloatDTypes, rng);
    const Layout layout = Pick(kLayouts, rng);
    const double eps = Pick<double>({1e-6, 1e-5, 0.1}, rng);
    const Tensor x = RandomTensor(shape, dtype, layout, rng, -2, 3);
    const Tensor weight =
        trial % 3 == 0
            ? Tensor()
            : RandomTensor({width}, dtype, Pick(kLayouts, rng), rng, 0.5, 1.5);
    const Tensor bias =
        trial % 2 == 0 ? Tensor()
                       : RandomTensor({width}, dtype, Pick(kLayouts, rng), rng);
    const std::string context =
        absl::StrCat("trial ", trial, ": ", ShapeToString(shape), " ",
                     std::string(DTypeName(dtype)), " ", LayoutName(layout),
                     weight.defined() ? " weight" : "",
                     bias.defined() ? " bias" : "", " eps ", eps);
    absl::StatusOr<Tensor> rms = RmsNorm(x, weight, eps);
    ASSERT_TRUE(rms.ok()) << context << ": " << rms.status();
    ExpectClose(*rms, shape, ReferenceNorm(x, weight, Tensor(), eps, true),
                ToleranceFor(dtype), context + " rms_norm");
    absl::StatusOr<Tensor> layer = LayerNorm(x, weight, bias, eps);
    ASSERT_TRUE(layer.ok()) << context << ": " << layer.status();
    ExpectClose(*layer, shape, ReferenceNorm(x, weight, bias, eps, false),
                ToleranceFor(dtype), context + " layer_norm");
  }
}

TEST(NormTest, BadInputs) {
  const Tensor x = Tensor::Zeros({2, 4}, DType::kF32).value();
  const Tensor short_weight = Tensor::Ones({3}, DType::kF32).value();
  ExpectInvalidArgument(RmsNorm(x, short_weight), {"[3]", "[2, 4]"});
  ExpectInvalidArgument(LayerNorm(x, Tensor(), short_weight),
                        {"[3]", "[2, 4]"});
  const Tensor f64_weight = Tensor::Ones({4}, DType::kF64).value();
  ExpectInvalidArgument(LayerNorm(x, f64_weight, Tensor()), {"f32", "f64"});
  ExpectInvalidArgument(RmsNorm(Tensor::Scalar(1.0), Tensor()), {"[]"});
  ExpectInvalidArgument(
      RmsNorm(Tensor::Zeros({4}, DType::kI32).value(), Tensor()), {"i32"});
}

// ---- Embedding. ----

TEST(EmbeddingTest, RandomIndexShapesAndDTypes) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t num = Pick<int64_t>({1, 2, 7}, rng);
    const int64_t dim = Pick<int64_t>({0, 1, 3, 8}, rng);
    const DType dtype = Pick(kFloatDTypes, rng);
    const Tensor table =
        RandomTensor({num, dim}, dtype, Pick(kLayouts, rng), rng);
    const Shape index_shape = RandomShape(
        std::uniform_int_distribution<int>(0, 3)(rng), {0, 1, 2, 5}, rng);
    const Tensor indices =
        RandomIndices(index_shape, num, Pick(kIndexDTypes, rng), rng);
    absl::StatusOr<Tensor> result = Embedding(indices, table);
    const std::string context = absl::StrCat(
        "trial ", trial, ": indices ", ShapeToString(index_shape), " table ",
        ShapeToString(table.shape()), " ", std::string(DTypeName(dtype)));
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    const std::vector<double> rows = table.ToVector<double>().value();
    std::vector<double> expected;
    const std::vector<int64_t> host_values =
        indices.ToVector<int64_t>().value();
    for (const int64_t row : host_values) {
      for (int64_t j = 0; j < dim; ++j) expected.push_back(rows[row * dim + j]);
    }
    Shape expected_shape = index_shape;
    expected_shape.push_back(dim);
    ExpectClose(*result, expected_shape, expected, {0, 0}, context);
  }
}

TEST(EmbeddingTest, BadInputs) {
  const Tensor table = Tensor::Zeros({5, 2}, DType::kF32).value();
  ExpectInvalidArgument(
      Embedding(Tensor::FromVector<int64_t>({0, 7}, {2}).value(), table),
      {"7", "5"});
  ExpectInvalidArgument(
      Embedding(Tensor::FromVector<int32_t>({-1}, {1}).value(), table),
      {"-1", "5"});
  ExpectInvalidArgument(
      Embedding(Tensor::FromVector<float>({1}, {1}).value(), table), {"f32"});
  ExpectInvalidArgument(Embedding(Tensor::FromVector<int64_t>({1}, {1}).value(),
                                  Tensor::Zeros({5}, DType::kF32).value()),
                        {"[5]"});
}

// The gradient of a row block [first, first + count) of the table by brute
// force: each grad row added at its index, in double.
TEST(EmbeddingBackwardTest, RandomIndicesBlocksLayoutsAndDTypes) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t num = Pick<int64_t>({1, 2, 7}, rng);
    const int64_t dim = Pick<int64_t>({0, 1, 3, 8}, rng);
    const int64_t first = std::uniform_int_distribution<int64_t>(0, num)(rng);
    const int64_t count =
        std::uniform_int_distribution<int64_t>(0, num - first)(rng);
    const DType dtype = Pick(kFloatDTypes, rng);
    const Shape index_shape = RandomShape(
        std::uniform_int_distribution<int>(0, 3)(rng), {0, 1, 2, 5}, rng);
    Shape grad_shape = index_shape;
    grad_shape.push_back(dim);
    const Tensor indices =
        RandomIndices(index_shape, num, Pick(kIndexDTypes, rng), rng);
    const Tensor grad =
        RandomTensor(grad_shape, dtype, Pick(kLayouts, rng), rng);
    const std::string context =
        absl::StrCat("trial ", trial, ": indices ", ShapeToString(index_shape),
                     " rows [", first, ", ", first + count, ") dim ", dim, " ",
                     std::string(DTypeName(dtype)));
    absl::StatusOr<Tensor> result =
        EmbeddingBackward(indices, grad, num, first, count);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    std::vector<double> expected(count * dim, 0.0);
    const std::vector<int64_t> rows = indices.ToVector<int64_t>().value();
    const std::vector<double> g = grad.ToVector<double>().value();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < first || rows[i] >= first + count) continue;
      for (int64_t j = 0; j < dim; ++j) {
        expected[(rows[i] - first) * dim + j] += g[i * dim + j];
      }
    }
    EXPECT_EQ(result->dtype(), dtype) << context;
    ExpectClose(*result, {count, dim}, expected, ToleranceFor(dtype), context);
  }
}

TEST(EmbeddingBackwardTest, BadInputs) {
  const Tensor indices = Tensor::FromVector<int64_t>({0, 3}, {2}).value();
  ExpectInvalidArgument(
      EmbeddingBackward(indices, Tensor::Zeros({3, 4}, DType::kF32).value(), 5),
      {"[3, 4]", "[2]"});
  ExpectInvalidArgument(
      EmbeddingBackward(indices, Tensor::Zeros({2, 4}, DType::kI64).value(), 5),
      {"i64"});
  ExpectInvalidArgument(
      EmbeddingBackward(indices, Tensor::Zeros({2, 4}, DType::kF32).value(),
                        -1),
      {"-1"});
  ExpectInvalidArgument(
      EmbeddingBackward(Tensor::FromVector<float>({1}, {1}).value(),
                        Tensor::Zeros({1, 4}, DType::kF32).value(), 5),
      {"f32"});
  // Index 3 of a 3-row table, even when asked for a block without it.
  const Tensor grad = Tensor::Zeros({2, 4}, DType::kF32).value();
  ExpectInvalidArgument(EmbeddingBackward(indices, grad, 3), {"3"});
  ExpectInvalidArgument(EmbeddingBackward(indices, grad, 3, 0, 1), {"3"});
  ExpectInvalidArgument(EmbeddingBackward(indices, grad, 5, 4, 2),
                        {"[4, 6)", "5 rows"});
}

// ---- CrossEntropy. ----

TEST(CrossEntropyTest, RandomLogitsTargetsAndReductions) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 150; ++trial) {
    const bool batched = trial % 4 != 0;
    const int64_t n = batched ? Pick<int64_t>({0, 1, 2, 5, 9}, rng) : 1;
    const int64_t classes = Pick<int64_t>({1, 2, 3, 10}, rng);
    const DType dtype = Pick(kFloatDTypes, rng);
    const Shape logits_shape = batched ? Shape{n, classes} : Shape{classes};
    const Tensor logits =
        RandomTensor(logits_shape, dtype, Pick(kLayouts, rng), rng, -3, 3);
    // The ignored class is sometimes a valid class, sometimes -100.
    const int64_t ignore_index = trial % 2 == 0 ? -100 : 1;
    std::vector<int64_t> targets(n);
    for (int64_t& t : targets) {
      t = std::uniform_int_distribution<int64_t>(0, classes - 1)(rng);
      if (std::bernoulli_distribution(0.25)(rng)) t = ignore_index;
    }
    const Tensor target =
        Tensor::FromVector<int64_t>(targets, batched ? Shape{n} : Shape{})
            .value()
            .To(Pick(kIndexDTypes, rng))
            .value();
    const std::vector<double> x = logits.ToVector<double>().value();
    std::vector<double> losses(n, 0.0);
    double total = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (targets[i] == ignore_index) continue;
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[i * classes + c]);
      losses[i] = std::log(sum) - x[i * classes + targets[i]];
      total += losses[i];
      ++counted;
    }
    const std::string context = absl::StrCat(
        "trial ", trial, ": logits ", ShapeToString(logits_shape), " ",
        std::string(DTypeName(dtype)), " ignore ", ignore_index);
    Tolerance tolerance = ToleranceFor(dtype);
    tolerance.atol *= 4;  // Losses up to ~8, sums of up to 9 of them.
    absl::StatusOr<Tensor> none =
        CrossEntropy(logits, target, Reduction::kNone, ignore_index);
    ASSERT_TRUE(none.ok()) << context << ": " << none.status();
    ExpectClose(*none, target.shape(), losses, tolerance, context + " none");
    absl::StatusOr<Tensor> sum =
        CrossEntropy(logits, target, Reduction::kSum, ignore_index);
    ASSERT_TRUE(sum.ok()) << context << ": " << sum.status();
    ExpectClose(*sum, {}, {total}, tolerance, context + " sum");
    absl::StatusOr<Tensor> mean =
        CrossEntropy(logits, target, Reduction::kMean, ignore_index);
    ASSERT_TRUE(mean.ok()) << context << ": " << mean.status();
    ExpectClose(*mean, {}, {counted == 0 ? std::nan("") : total / counted},
                tolerance, context + " mean");
  }
}

TEST(CrossEntropyTest, BadInputs) {
  const Tensor logits = Tensor::Zeros({4, 3}, DType::kF32).value();
  ExpectInvalidArgument(
      CrossEntropy(logits,
                   Tensor::FromVector<int64_t>({0, 1, 5, 2}, {4}).value()),
      {"5", "3"});
  ExpectInvalidArgument(
      CrossEntropy(logits,
                   Tensor::FromVector<int64_t>({0, 1, -1, 2}, {4}).value()),
      {"-1", "3"});
  ExpectInvalidArgument(
      CrossEntropy(logits, Tensor::Zeros({5}, DType::kI64).value()),
      {"[4, 3]", "[5]"});
  ExpectInvalidArgument(
      CrossEntropy(logits, Tensor::Zeros({4}, DType::kF32).value()), {"f32"});
  ExpectInvalidArgument(CrossEntropy(Tensor::Zeros({4, 3}, DType::kI64).value(),
                                     Tensor::Zeros({4}, DType::kI64).value()),
                        {"i64"});
}

// ---- RotaryEmbedding. ----

// The rotary embedding of x [..., seq, heads, head_dim] in f64, computed
// element by element: pair (i, i + half) of row s rotates by
// positions[s] * theta^(-2i / head_dim).
std::vector<double> RotaryReference(const Tensor& x,
                                    const std::vector<int64_t>& positions,
                                    double theta) {
  const std::vector<double> values = x.ToVector<double>().value();
  const int64_t rank = x.dim();
  const int64_t head_dim = x.size(-1);
  const int64_t half = head_dim / 2;
  std::vector<double> expected(values.size());
  for (size_t p = 0; p < values.size(); ++p) {
    const std::vector<int64_t> index =
        Unravel(static_cast<int64_t>(p), x.shape());
    const int64_t s = index[rank - 3];
    const int64_t c = index[rank - 1];
    const int64_t i = c % half;
    const double angle = positions[s] * std::pow(theta, -2.0 * i / head_dim);
    // rotate_half(x) = [-x2, x1]; out = x cos + rotate_half(x) sin.
    const double partner = c < half ? -values[p + half] : values[p - half];
    expected[p] = values[p] * std::cos(angle) + partner * std::sin(angle);
  }
  return expected;
}

TEST(RotaryEmbeddingTest, RandomShapesPositionsAndDTypes) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 100; ++trial) {
    const int rank = std::uniform_int_distribution<int>(3, 4)(rng);
    Shape shape = RandomShape(rank - 3, {1, 2}, rng);
    const int64_t seq = Pick<int64_t>({0, 1, 3, 6}, rng);
    const int64_t heads = Pick<int64_t>({1, 2, 3}, rng);
    const int64_t head_dim = Pick<int64_t>({0, 2, 4, 8}, rng);
    shape.insert(shape.end(), {seq, heads, head_dim});
    const DType dtype = Pick(kFloatDTypes, rng);
    const double theta = Pick<double>({10000.0, 500000.0, 3.0}, rng);
    const Tensor x = RandomTensor(shape, dtype, Pick(kLayouts, rng), rng);
    const Tensor positions =
        trial % 2 == 0
            ? Tensor()
            : RandomIndices({seq}, 100, Pick(kIndexDTypes, rng), rng);
    std::vector<int64_t> position_values(seq);
    for (int64_t s = 0; s < seq; ++s) position_values[s] = s;
    if (positions.defined())
      position_values = positions.ToVector<int64_t>().value();
    const std::vector<double> expected =
        RotaryReference(x, position_values, theta);
    const std::string context =
        absl::StrCat("trial ", trial, ": ", ShapeToString(shape), " theta ",
                     theta, positions.defined() ? " positions " : " ",
                     std::string(DTypeName(dtype)));
    absl::StatusOr<Tensor> result = RotaryEmbedding(x, positions, theta);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    ExpectClose(*result, shape, expected, ToleranceFor(dtype), context);
  }
}

// The cached tables of positions first.. (the rotation back with `inverse`)
// give what the explicit positions give, bit for bit; the tables are made
// once.
TEST(RotaryEmbeddingTest, FromFirstPositionMatchesExplicitPositions) {
  std::mt19937 rng(37);
  for (const int64_t first : {0, 1, 5}) {
    for (const bool inverse : {false, true}) {
      for (DType dtype : kFloatDTypes) {
        const Tensor x =
            RandomTensor({2, 4, 3, 6}, dtype, Pick(kLayouts, rng), rng);
        std::vector<int64_t> positions(4);
        for (int64_t s = 0; s < 4; ++s) {
          positions[s] = first + s;
        }
        const Tensor explicit_positions =
            Tensor::FromVector(positions, {4}).value();
        const std::string context =
            absl::StrCat("first ", first, inverse ? " inverse " : " ",
                         std::string(DTypeName(dtype)));
        const absl::StatusOr<Tensor> got =
            RotaryEmbeddingFrom(x, first, 500.0, inverse);
        ASSERT_TRUE(got.ok()) << context << ": " << got.status();
        EXPECT_EQ(got->ToVector<double>().value(),
                  RotaryEmbedding(x, explicit_positions, 500.0, inverse)
                      ->ToVector<double>()
                      .value())
            << context;
      }
    }
  }
  const RotaryTables a =
      CachedRotaryTables(2, 3, 4, 500.0, false, Device::CPU()).value();
  const RotaryTables b =
      CachedRotaryTables(1, 4, 4, 500.0, false, Device::CPU()).value();
  EXPECT_EQ(a.cos.storage(), b.cos.storage());
  EXPECT_EQ(a.cos.At({0, 1}), b.cos.At({1, 1}));
  ExpectInvalidArgument(
      RotaryEmbeddingFrom(Tensor::Zeros({2, 3, 4}, DType::kF32).value(), -1,
                          500.0),
      {"-1"});
}

// `inverse` rotates by minus the angles: it matches the reference's
// rotation by the negated positions, and undoes the forward rotation. The
// positions are runs (cached tables), shuffled or negative (host tables), or
// none (0..seq-1).
TEST(RotaryEmbeddingTest, InverseRotatesBack) {
  std::mt19937 rng(41);
  const std::vector<std::vector<int64_t>> cases = {
      {}, {0, 1, 2, 3, 4}, {6, 7, 0, 1, 2}, {3, 0, 4, 1, 2}, {-2, 5, -7, 1, 0}};
  for (const std::vector<int64_t>& positions : cases) {
    const int64_t seq = 5;
    const Tensor x =
        RandomTensor({2, seq, 3, 6}, DType::kF64, Pick(kLayouts, rng), rng);
    const Tensor position_tensor =
        positions.empty() ? Tensor()
                          : Tensor::FromVector(positions, {seq}).value();
    std::vector<int64_t> negated(seq);
    for (int64_t s = 0; s < seq; ++s) {
      negated[s] = -(positions.empty() ? s : positions[s]);
    }
    const std::string context =
        absl::StrCat("positions [", absl::StrJoin(positions, ","), "]");
    const absl::StatusOr<Tensor> back =
        RotaryEmbedding(x, position_tensor, 500.0, /*inverse=*/true);
    ASSERT_TRUE(back.ok()) << context << ": " << back.status();
    ExpectClose(*back, x.shape(), RotaryReference(x, negated, 500.0),
                ToleranceFor(DType::kF64), context);
    const absl::StatusOr<Tensor> there_and_back =
        RotaryEmbedding(RotaryEmbedding(x, position_tensor, 500.0).value(),
                        position_tensor, 500.0, /*inverse=*/true);
    ASSERT_TRUE(there_and_back.ok()) << context;
    ExpectClose(*there_and_back, x.shape(), x.ToVector<double>().value(),
                ToleranceFor(DType::kF64), context + " round trip");
  }
}

TEST(RotaryEmbeddingTest, BadInputs) {
  ExpectInvalidArgument(
      RotaryEmbedding(Tensor::Zeros({2, 3, 5}, DType::kF32).value(), Tensor()),
      {"[2, 3, 5]"});
  ExpectInvalidArgument(
      RotaryEmbedding(Tensor::Zeros({3, 4}, DType::kF32).value(), Tensor()),
      {"[3, 4]"});
  const Tensor x = Tensor::Zeros({2, 3, 4}, DType::kF32).value();
  ExpectInvalidArgument(
      RotaryEmbedding(x, Tensor::Zeros({3}, DType::kI64).value()),
      {"[3]", "[2, 3, 4]"});
  ExpectInvalidArgument(
      RotaryEmbedding(x, Tensor::Zeros({2}, DType::kF32).value()), {"f32"});
  ExpectInvalidArgument(RotaryEmbedding(x, Tensor(), -1.0), {"-1"});
}

}  // namespace
}  // namespace dtensor
