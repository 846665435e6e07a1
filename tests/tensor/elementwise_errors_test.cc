// The elementwise ops' errors on bad input: shapes that do not broadcast,
// mismatched dtypes, integer division by zero, ops that reject a dtype, and
// undefined tensors; each error names the bad value.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using BinaryFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);

TEST(ElementwiseErrorsTest, ShapesThatDoNotBroadcastNameBothShapes) {
  const Tensor a = Tensor::Zeros({2, 3}, DType::kF32).value();
  const Tensor b = Tensor::Zeros({4}, DType::kF32).value();
  absl::StatusOr<Tensor> result = Add(a, b);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("Add"), HasSubstr("[2, 3]"), HasSubstr("[4]")));
  absl::StatusOr<Shape> shape = BroadcastShapes({2, 3}, {4});
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(),
              AllOf(HasSubstr("[2, 3]"), HasSubstr("[4]")));
}

TEST(ElementwiseErrorsTest, DTypeMismatchNamesBothDTypes) {
  const Tensor a = Tensor::Zeros({2}, DType::kF32).value();
  const Tensor b = Tensor::Zeros({2}, DType::kI32).value();
  for (BinaryFn fn : {BinaryFn{Mul}, BinaryFn{Lt}}) {
    absl::StatusOr<Tensor> result = fn(a, b);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(),
                AllOf(HasSubstr("f32"), HasSubstr("i32")));
  }
}

TEST(ElementwiseErrorsTest, IntegerDivisionByZero) {
  for (DType dtype : {DType::kI32, DType::kI64}) {
    const Tensor a = Tensor::Ones({3}, dtype).value();
    const Tensor b =
        Tensor::FromVector<double>({1, 0, 2}, {3}).value().To(dtype).value();
    absl::StatusOr<Tensor> result = Div(a, b);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        result.status().message(),
        AllOf(HasSubstr("division by zero"),
              HasSubstr(std::string(DTypeName(dtype))), HasSubstr("[3]")));
    absl::StatusOr<Tensor> by_scalar = Div(a, 0.0);
    EXPECT_EQ(by_scalar.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(by_scalar.status().message(), HasSubstr("division by zero"));
  }
  // Floating division by zero is IEEE: inf, not an error.
  absl::StatusOr<Tensor> inf = Div(Tensor::Ones({1}, DType::kF32).value(), 0.0);
  ASSERT_TRUE(inf.ok()) << inf.status();
  EXPECT_TRUE(std::isinf(inf->At({0})));
}

TEST(ElementwiseErrorsTest, FloatOnlyOpsRejectIntegersNamingTheDType) {
  const Tensor x = Tensor::Ones({2}, DType::kI64).value();
  const std::vector<std::pair<std::string, absl::StatusOr<Tensor>>> results = {
      {"Exp", Exp(x)},
      {"Log", Log(x)},
      {"Sqrt", Sqrt(x)},
      {"Rsqrt", Rsqrt(x)},
      {"Gelu", Gelu(x)},
      {"Silu", Silu(x)},
      {"Sigmoid", Sigmoid(x)},
      {"Tanh", Tanh(x)},
      {"Pow", Pow(x, x)},
      {"Pow", Pow(x, 2.0)},
      {"SiluBackward", SiluBackward(x, x)},
  };
  for (const auto& [name, result] : results) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_THAT(result.status().message(),
                AllOf(HasSubstr(name), HasSubstr("i64")));
  }
}

TEST(ElementwiseErrorsTest, ArithmeticRejectsBool) {
  const Tensor x = Tensor::Ones({2}, DType::kBool).value();
  for (const absl::StatusOr<Tensor>& result :
       {Add(x, x), Sub(x, x), Mul(x, x), Div(x, x), Neg(x), Abs(x), Relu(x)}) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("bool"));
  }
}

TEST(ElementwiseErrorsTest, WhereChecksCondDTypeAndShapes) {
  const Tensor f = Tensor::Zeros({2, 3}, DType::kF32).value();
  absl::StatusOr<Tensor> not_bool = Where(f, f, f);
  EXPECT_EQ(not_bool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_bool.status().message(),
              AllOf(HasSubstr("cond"), HasSubstr("f32")));

  const Tensor cond = Tensor::Zeros({4, 1, 1}, DType::kBool).value();
  const Tensor b = Tensor::Zeros({5}, DType::kF32).value();
  absl::StatusOr<Tensor> bad_shape = Where(cond, f, b);
  EXPECT_EQ(bad_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      bad_shape.status().message(),
      AllOf(HasSubstr("[4, 1, 1]"), HasSubstr("[2, 3]"), HasSubstr("[5]")));

  absl::StatusOr<Tensor> mixed =
      Where(cond, f, Tensor::Zeros({3}, DType::kF64).value());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.status().message(),
              AllOf(HasSubstr("f32"), HasSubstr("f64")));
}

TEST(ElementwiseErrorsTest, UndefinedTensors) {
  const Tensor defined = Tensor::Zeros({2}, DType::kF32).value();
  for (const absl::StatusOr<Tensor>& result :
       {Add(Tensor(), defined), Add(defined, Tensor()), Exp(Tensor()),
        Where(Tensor(), defined, defined)}) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("undefined"));
  }
}

}  // namespace
}  // namespace dtensor
