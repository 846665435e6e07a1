// ScaledDotProductAttention and its backward against the reference in double
// (tests/tensor/reference_attention.h): random shapes, broadcasting, masks,
// layouts and dtypes, sequences spanning tiles, and bad inputs.
#include "dtensor/tensor/attention.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/reference_attention.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::ExpectInvalidArgument;
using ::dtensor::testing::kFloatDTypes;
using ::dtensor::testing::kLayouts;
using ::dtensor::testing::Layout;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomShape;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;
using ::testing::HasSubstr;

// A random attention call: a random batch (sizes from `batch_sizes`) of
// which each operand keeps a random number of trailing dims, some as 1
// (broadcast, grouped-query among them); sequence lengths from `lengths`,
// head dims from `dims`; random layouts, mask, scale and dtype.
struct AttentionCase {
  Tensor q, k, v;
  bool causal = false;
  double scale = 0;
  DType dtype = DType::kF32;
  std::string context;
};

AttentionCase RandomAttentionCase(int trial,
                                  const std::vector<int64_t>& batch_sizes,
                                  const std::vector<int64_t>& lengths,
                                  const std::vector<int64_t>& dims,
                                  std::mt19937& rng) {
  const int batch_rank = std::uniform_int_distribution<int>(0, 2)(rng);
  const Shape batch = RandomShape(batch_rank, batch_sizes, rng);
  const auto leading = [&]() {
    const int rank = std::uniform_int_distribution<int>(0, batch_rank)(rng);
    Shape shape;
    for (int d = batch_rank - rank; d < batch_rank; ++d) {
      shape.push_back(Pick<int64_t>({batch[d], batch[d], 1}, rng));
    }
    return shape;
  };
  const int64_t lq = Pick(lengths, rng), lk = Pick(lengths, rng);
  const int64_t e = Pick(dims, rng), ev = Pick(dims, rng);
  AttentionCase c;
  c.causal = std::bernoulli_distribution(0.5)(rng);
  c.scale = Pick<double>({0.0, 0.3}, rng);
  c.dtype = Pick(kFloatDTypes, rng);
  Shape q_shape = leading(), k_shape = leading(), v_shape = leading();
  q_shape.insert(q_shape.end(), {lq, e});
  k_shape.insert(k_shape.end(), {lk, e});
  v_shape.insert(v_shape.end(), {lk, ev});
  c.q = RandomTensor(q_shape, c.dtype, Pick(kLayouts, rng), rng);
  c.k = RandomTensor(k_shape, c.dtype, Pick(kLayouts, rng), rng);
  c.v = RandomTensor(v_shape, c.dtype, Pick(kLayouts, rng), rng);
  c.context =
      absl::StrCat("trial ", trial, ": q ", ShapeToString(q_shape), " k ",
                   ShapeToString(k_shape), " v ", ShapeToString(v_shape),
                   c.causal ? " causal" : "", " scale ", c.scale, " ",
                   std::string(DTypeName(c.dtype)));
  return c;
}

// The forward, and the backward of a random output gradient given the
// forward's output, against the reference in double (a query that sees no
// key: zero output and no gradient).
void CheckAttention(const AttentionCase& c, std::mt19937& rng) {
  absl::StatusOr<Tensor> out =
      ScaledDotProductAttention(c.q, c.k, c.v, c.causal, c.scale);
  ASSERT_TRUE(out.ok()) << c.context << ": " << out.status();
  const Tensor grad =
      RandomTensor(out->shape(), c.dtype, Pick(kLayouts, rng), rng);
  const testing::AttentionReference r =
      testing::ReferenceAttention(c.q, c.k, c.v, grad, c.causal, c.scale);
  ExpectClose(*out, r.out_shape, r.out, ToleranceFor(c.dtype), c.context);
  absl::StatusOr<AttentionGrads> grads = ScaledDotProductAttentionBackward(
      c.q, c.k, c.v, *out, grad, c.causal, c.scale);
  ASSERT_TRUE(grads.ok()) << c.context << ": " << grads.status();
  // Sums over the keys or queries, and delta from the rounded output.
  Tolerance tolerance = ToleranceFor(c.dtype);
  tolerance.atol *= 4;
  tolerance.rtol *= 4;
  ExpectClose(grads->dq, c.q.shape(), r.dq, tolerance, c.context + " dq");
  ExpectClose(grads->dk, c.k.shape(), r.dk, tolerance, c.context + " dk");
  ExpectClose(grads->dv, c.v.shape(), r.dv, tolerance, c.context + " dv");
  EXPECT_EQ(grads->dq.dtype(), c.dtype) << c.context;
}

TEST(AttentionTest, RandomShapesBroadcastingMasksAndDTypes) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 200; ++trial) {
    CheckAttention(RandomAttentionCase(trial, {0, 1, 2, 3}, {0, 1, 2, 3, 5, 7},
                                       {0, 1, 2, 4, 8}, rng),
                   rng);
  }
}

// Sequences across several tiles (the host's are 64 queries by 256 keys),
// of lengths that are not multiples of them, either longer than the other.
TEST(AttentionTest, SequencesSpanningTilesMatchTheReference) {
  std::mt19937 rng(24);
  for (int trial = 0; trial < 24; ++trial) {
    CheckAttention(
        RandomAttentionCase(trial, {1, 2, 3}, {1, 63, 64, 65, 257, 300},
                            {1, 16, 33}, rng),
        rng);
  }
}

TEST(AttentionTest, CausalMaskAlignsToTheEnd) {
  // Lq = 2, Lk = 3: query 0 sees keys 0..1, query 1 sees keys 0..2. With all
  // scores equal the output is the mean of the visible values.
  const Tensor q = Tensor::Zeros({2, 1}, DType::kF64).value();
  const Tensor k = Tensor::Zeros({3, 1}, DType::kF64).value();
  const Tensor v = Tensor::FromVector<double>({1, 2, 6}, {3, 1}).value();
  ExpectClose(ScaledDotProductAttention(q, k, v, true).value(), {2, 1},
              {1.5, 3.0}, ToleranceFor(DType::kF64));
  // Lq = 3, Lk = 2: query 0 sees nothing (zeros), query 1 key 0, query 2 both.
  const Tensor q3 = Tensor::Zeros({3, 1}, DType::kF64).value();
  const Tensor k2 = Tensor::Zeros({2, 1}, DType::kF64).value();
  const Tensor v2 = Tensor::FromVector<double>({1, 3}, {2, 1}).value();
  ExpectClose(ScaledDotProductAttention(q3, k2, v2, true).value(), {3, 1},
              {0.0, 1.0, 2.0}, ToleranceFor(DType::kF64));
}

TEST(AttentionTest, BadInputs) {
  const Tensor q = Tensor::Zeros({2, 4, 8}, DType::kF32).value();
  const Tensor k = Tensor::Zeros({2, 5, 8}, DType::kF32).value();
  const Tensor v = Tensor::Zeros({2, 5, 3}, DType::kF32).value();
  ExpectInvalidArgument(
      ScaledDotProductAttention(
          q, Tensor::Zeros({2, 5, 7}, DType::kF32).value(), v, false),
      {"[2, 4, 8]", "[2, 5, 7]"});
  ExpectInvalidArgument(
      ScaledDotProductAttention(
          q, k, Tensor::Zeros({2, 6, 3}, DType::kF32).value(), false),
      {"[2, 5, 8]", "[2, 6, 3]"});
  ExpectInvalidArgument(
      ScaledDotProductAttention(
          q, Tensor::Zeros({3, 5, 8}, DType::kF32).value(), v, false),
      {"[2, 4, 8]", "[3, 5, 8]"});
  ExpectInvalidArgument(
      ScaledDotProductAttention(
          q, k, Tensor::Zeros({2, 5, 3}, DType::kF64).value(), false),
      {"f32", "f64"});
  ExpectInvalidArgument(
      ScaledDotProductAttention(Tensor::Zeros({8}, DType::kF32).value(), k, v,
                                false),
      {"[8]"});
}

TEST(AttentionTest, AQueryThatSeesNoKeyGetsNoGradient) {
  // Lq = 3, Lk = 2, causal: query 0 sees no key, query 1 key 0.
  std::mt19937 rng(25);
  const Tensor q = RandomTensor({3, 2}, DType::kF64, Layout::kContiguous, rng);
  const Tensor k = RandomTensor({2, 2}, DType::kF64, Layout::kContiguous, rng);
  const Tensor v = RandomTensor({2, 2}, DType::kF64, Layout::kContiguous, rng);
  const Tensor out = ScaledDotProductAttention(q, k, v, true).value();
  const Tensor grad = Tensor::Ones({3, 2}, DType::kF64).value();
  const AttentionGrads grads =
      ScaledDotProductAttentionBackward(q, k, v, out, grad, true).value();
  const std::vector<double> dq = grads.dq.ToVector<double>().value();
  EXPECT_EQ(dq[0], 0.0);
  EXPECT_EQ(dq[1], 0.0);
  // Query 1 sees key 0 alone: its weight is 1 whatever the score.
  EXPECT_EQ(dq[2], 0.0);
  EXPECT_EQ(dq[3], 0.0);
  EXPECT_NE(dq[4], 0.0);
}

TEST(AttentionTest, BackwardBadInputs) {
  const Tensor q = Tensor::Zeros({2, 4, 8}, DType::kF32).value();
  const Tensor k = Tensor::Zeros({2, 5, 8}, DType::kF32).value();
  const Tensor v = Tensor::Zeros({2, 5, 3}, DType::kF32).value();
  const Tensor out = Tensor::Zeros({2, 4, 3}, DType::kF32).value();
  const auto expect_error = [](const absl::StatusOr<AttentionGrads>& result,
                               const std::vector<std::string>& fragments) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << result.status();
    for (const std::string& fragment : fragments) {
      EXPECT_THAT(result.status().message(), HasSubstr(fragment));
    }
  };
  expect_error(
      ScaledDotProductAttentionBackward(
          q, k, v, Tensor::Zeros({2, 4, 2}, DType::kF32).value(), out, false),
      {"out", "[2, 4, 2]", "[2, 4, 3]"});
  expect_error(
      ScaledDotProductAttentionBackward(
          q, k, v, out, Tensor::Zeros({2, 4, 3}, DType::kF64).value(), false),
      {"grad_out", "f64"});
  expect_error(
      ScaledDotProductAttentionBackward(
          q, Tensor::Zeros({2, 5, 7}, DType::kF32).value(), v, out, out, false),
      {"ScaledDotProductAttentionBackward", "[2, 5, 7]"});
}

}  // namespace
}  // namespace dtensor
