// Tensor::ToString against hand-written NumPy-style text.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

Tensor Range(int64_t n, DType dtype, Shape shape) {
  return *Tensor::Arange(0, n, 1, dtype)->View(shape);
}

TEST(TensorPrintTest, Matrix) {
  auto x = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(x->ToString(), "tensor([[1, 2],\n        [3, 4]], dtype=f32)");
}

TEST(TensorPrintTest, ScalarAndVector) {
  EXPECT_EQ(Tensor::Scalar(3.5).ToString(), "tensor(3.5, dtype=f32)");
  EXPECT_EQ(Range(6, DType::kI64, {6}).ToString(),
            "tensor([0, 1, 2, 3, 4, 5], dtype=i64)");
}

TEST(TensorPrintTest, ElidesDimsLongerThanSix) {
  EXPECT_EQ(Range(10, DType::kI64, {10}).ToString(),
            "tensor([0, 1, 2, ..., 7, 8, 9], dtype=i64)");
  EXPECT_EQ(Range(16, DType::kI32, {8, 2}).ToString(),
            "tensor([[ 0,  1],\n"
            "        [ 2,  3],\n"
            "        [ 4,  5],\n"
            "        ...,\n"
            "        [10, 11],\n"
            "        [12, 13],\n"
            "        [14, 15]], dtype=i32)");
}

TEST(TensorPrintTest, ThreeDimsSeparateBlocksByABlankLine) {
  EXPECT_EQ(Range(8, DType::kI64, {2, 2, 2}).ToString(),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]], dtype=i64)");
}

TEST(TensorPrintTest, PadsToTheWidestElement) {
  auto x = Tensor::FromVector<int32_t>({1, 10, -3}, {3});
  EXPECT_EQ(x->ToString(), "tensor([ 1, 10, -3], dtype=i32)");
  auto flags = Tensor::FromVector<bool>({true, false}, {2});
  EXPECT_EQ(flags->ToString(), "tensor([ true, false], dtype=bool)");
}

TEST(TensorPrintTest, FloatFormats) {
  auto x = Tensor::FromVector<double>(
      {0.1, 1e-7, 2.5e10, -0.0, std::nan(""), -INFINITY}, {6});
  EXPECT_EQ(x->ToString(),
            "tensor([    0.1,   1e-07, 2.5e+10,      -0,     nan,    -inf], "
            "dtype=f64)");
  auto h = Tensor::FromVector<double>({2.5, 0.1}, {2})->To(DType::kF16);
  EXPECT_EQ(h->ToString(), "tensor([      2.5, 0.0999756], dtype=f16)");
}

TEST(TensorPrintTest, ViewsPrintInLogicalOrder) {
  auto t = Range(6, DType::kI64, {2, 3}).Transpose(0, 1);
  EXPECT_EQ(t->ToString(),
            "tensor([[0, 3],\n        [1, 4],\n        [2, 5]], dtype=i64)");
}

TEST(TensorPrintTest, EmptyAndUndefined) {
  EXPECT_EQ(Tensor::Zeros({0, 3}, DType::kF32)->ToString(),
            "tensor([], shape=[0, 3], dtype=f32)");
  EXPECT_EQ(Tensor().ToString(), "tensor(undefined)");
}

TEST(TensorPrintTest, StreamOperatorPrintsToString) {
  const Tensor x = Range(3, DType::kI64, {3});
  std::ostringstream os;
  os << x;
  EXPECT_EQ(os.str(), x.ToString());
}

}  // namespace
}  // namespace dtensor
