// AddRmsNorm and AddRmsNormBackward (the fused residual add + RMSNorm)
// against a reference of add-then-RMSNorm in double written here, on random
// shapes, layouts, dtypes and eps, with and without weight; the kernel bodies
// as the device runs them (several lanes, packs of 16 bytes) against the same
// reference; and the CPU kernel bit for bit against Add then RmsNorm.
#include "dtensor/tensor/fused_norm.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/fused_norm_body.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tensor/fused_norm_reference.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::Layout;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Reference;
using ::dtensor::testing::ReferenceBackward;
using ::dtensor::testing::ReferenceForward;
using ::dtensor::testing::ReferenceGrads;
using ::dtensor::testing::Scaled;
using ::dtensor::testing::Values;
using ::testing::HasSubstr;

// A random trial of the forward and backward tests: a dtype, a shape of 1 to
// 3 dims (the last of several widths), an eps, the two operands of that
// shape (the residual or the sum, in a random layout, in [-2, 2); the delta
// or the output's gradient, contiguous, in [-1, 1)), a weight (none every 4th
// trial), and the trial's name for failure messages.
struct Trial {
  DType dtype;
  Shape shape;
  double eps;
  Tensor x;
  Tensor y;
  Tensor weight;
  std::string what;
};

Trial DrawTrial(int trial, std::mt19937& rng) {
  Trial t;
  t.dtype = Pick(testing::kFloatDTypes, rng);
  t.shape = testing::RandomShape(1 + trial % 3, {1, 2, 5}, rng);
  t.shape.back() = Pick<int64_t>({1, 7, 8, 64, 300}, rng);
  t.eps = Pick<double>({1e-6, 1e-5, 0.1}, rng);
  const Layout layout = Pick(testing::kLayouts, rng);
  t.x = RandomTensor(t.shape, t.dtype, layout, rng, -2, 2);
  t.y = RandomTensor(t.shape, t.dtype, Layout::kContiguous, rng, -1, 1);
  if (trial % 4 != 0) {
    t.weight = RandomTensor({t.shape.back()}, t.dtype, Layout::kContiguous, rng,
                            0.5, 1.5);
  }
  t.what = absl::StrCat("trial ", trial, " ", ShapeToString(t.shape), " ",
                        std::string(DTypeName(t.dtype)), " eps ", t.eps);
  return t;
}

TEST(AddRmsNormTest, MatchesAddThenRmsNormInDouble) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const auto [dtype, shape, eps, residual, delta, weight, what] =
        DrawTrial(trial, rng);
    const absl::StatusOr<AddRmsNormOutputs> out =
        AddRmsNorm(residual, delta, weight, eps);
    ASSERT_TRUE(out.ok()) << what << ": " << out.status();
    const Reference ref = ReferenceForward(Values(residual), Values(delta),
                                           Values(weight), shape.back(), eps);
    ExpectClose(out->sum, shape, ref.sum, Scaled(dtype, 2), what + " sum");
    ExpectClose(out->normed, shape, ref.normed, Scaled(dtype, 4),
                what + " normed");
  }
}

TEST(AddRmsNormTest, EqualsAddThenRmsNormBitForBit) {
  std::mt19937 rng(8);
  for (const DType dtype : testing::kFloatDTypes) {
    const Tensor residual =
        RandomTensor({3, 5, 40}, dtype, Layout::kContiguous, rng, -3, 3);
    const Tensor delta =
        RandomTensor({3, 5, 40}, dtype, Layout::kContiguous, rng, -3, 3);
    const Tensor weight =
        RandomTensor({40}, dtype, Layout::kContiguous, rng, 0.5, 1.5);
    const absl::StatusOr<AddRmsNormOutputs> fused =
        AddRmsNorm(residual, delta, weight, 1e-5);
    ASSERT_TRUE(fused.ok()) << fused.status();
    const Tensor sum = *Add(residual, delta);
    const Tensor normed = *RmsNorm(sum, weight, 1e-5);
    EXPECT_EQ(Values(fused->sum), Values(sum)) << std::string(DTypeName(dtype));
    EXPECT_EQ(Values(fused->normed), Values(normed))
        << std::string(DTypeName(dtype));
  }
}

// The bodies as a block of `lanes` threads runs them, in packs of V.
template <typename T, int V>
void RunBodies(const T* residual, const T* delta, const T* weight, T* sum,
               T* out, int64_t rows, int64_t width, double eps, int lanes) {
  using P = cuda::Pack<T, V>;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * width;
    const int64_t packs = width / V;
    double squares = 0;
    for (int lane = 0; lane < lanes; ++lane) {
      squares += cuda::AddSquaresPartial(
          reinterpret_cast<const P*>(residual + base),
          reinterpret_cast<const P*>(delta + base),
          reinterpret_cast<P*>(sum + base), packs, lane, lanes);
    }
    for (int lane = 0; lane < lanes; ++lane) {
      cuda::AddRmsNormWrite(reinterpret_cast<const P*>(sum + base),
                            reinterpret_cast<const P*>(weight),
                            reinterpret_cast<P*>(out + base), packs, squares,
                            eps, lane, lanes);
    }
  }
}

TEST(AddRmsNormTest, BodiesInPacksMatchTheReference) {
  std::mt19937 rng(9);
  for (const DType dtype : testing::kFloatDTypes) {
    for (const int64_t width : {16, 64, 256}) {
      const int64_t rows = 3;
      const Tensor residual =
          RandomTensor({rows, width}, dtype, Layout::kContiguous, rng, -2, 2);
      const Tensor delta =
          RandomTensor({rows, width}, dtype, Layout::kContiguous, rng, -2, 2);
      const Tensor weight =
          RandomTensor({width}, dtype, Layout::kContiguous, rng, 0.5, 1.5);
      Tensor sum = *Tensor::Empty({rows, width}, dtype);
      Tensor out = *Tensor::Empty({rows, width}, dtype);
      DispatchFloatingBodyStorage(dtype, [&](auto tag) {
        using T = decltype(tag);
        RunBodies<T, 16 / sizeof(T)>(static_cast<const T*>(residual.raw_data()),
                                     static_cast<const T*>(delta.raw_data()),
                                     static_cast<const T*>(weight.raw_data()),
                                     static_cast<T*>(sum.raw_data()),
                                     static_cast<T*>(out.raw_data()), rows,
                                     width, 1e-6, /*lanes=*/3);
      });
      const Reference ref = ReferenceForward(Values(residual), Values(delta),
                                             Values(weight), width, 1e-6);
      const std::string what =
          absl::StrCat(std::string(DTypeName(dtype)), " width ", width);
      ExpectClose(sum, {rows, width}, ref.sum, Scaled(dtype, 2), what);
      ExpectClose(out, {rows, width}, ref.normed, Scaled(dtype, 4), what);
    }
  }
}

TEST(AddRmsNormBackwardTest, MatchesTheReferenceInDouble) {
  std::mt19937 rng(10);
  for (int trial = 0; trial < 60; ++trial) {
    const auto [dtype, shape, eps, x, g, weight, what] = DrawTrial(trial, rng);
    const Tensor grad_sum =
        trial % 5 == 0 ? Tensor()
                       : RandomTensor(shape, dtype, Layout::kTransposed, rng);
    const absl::StatusOr<NormGrads> grads =
        AddRmsNormBackward(x, weight, g, grad_sum, eps);
    ASSERT_TRUE(grads.ok()) << what << ": " << grads.status();
    const ReferenceGrads ref =
        ReferenceBackward(Values(x), Values(weight), Values(g),
                          Values(grad_sum), shape.back(), eps);
    ExpectClose(grads->dx, shape, ref.dx, Scaled(dtype, 8), what + " dx");
    EXPECT_EQ(grads->dweight.defined(), weight.defined()) << what;
    if (weight.defined()) {
      const double rows = static_cast<double>(x.numel() / shape.back());
      ExpectClose(grads->dweight, {shape.back()}, ref.dweight,
                  Scaled(dtype, 8 * std::sqrt(rows)), what + " dweight");
    }
    EXPECT_FALSE(grads->dbias.defined()) << what;
  }
}

TEST(AddRmsNormTest, RejectsMismatchedOperands) {
  const Tensor x = *Tensor::Zeros({2, 4}, DType::kF32);
  const absl::StatusOr<AddRmsNormOutputs> wrong_shape =
      AddRmsNorm(x, *Tensor::Zeros({2, 3}, DType::kF32), Tensor());
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_THAT(wrong_shape.status().message(),
              HasSubstr("delta has shape [2, 3]"));
  const absl::StatusOr<AddRmsNormOutputs> wrong_dtype =
      AddRmsNorm(x, *Tensor::Zeros({2, 4}, DType::kF64), Tensor());
  EXPECT_FALSE(wrong_dtype.ok());
  const absl::StatusOr<AddRmsNormOutputs> wrong_weight =
      AddRmsNorm(x, x, *Tensor::Zeros({3}, DType::kF32));
  ASSERT_FALSE(wrong_weight.ok());
  EXPECT_THAT(wrong_weight.status().message(), HasSubstr("weight"));
  const absl::StatusOr<NormGrads> wrong_grad_sum =
      AddRmsNormBackward(x, Tensor(), x, *Tensor::Zeros({4, 2}, DType::kF32));
  ASSERT_FALSE(wrong_grad_sum.ok());
  EXPECT_THAT(wrong_grad_sum.status().message(),
              HasSubstr("residual_grad has shape [4, 2]"));
}

}  // namespace
}  // namespace dtensor
