// Gradients of the elementwise ops: against finite differences in f64 on one
// rank, and on random layouts of in-process meshes against the one-rank
// gradients (dtensor/testing/grad_checks.h). Every op of the family is covered.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/testing/grad_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckGradCases;
using testing_util::GradCase;
using testing_util::Random64;
using In = std::vector<DTensor>;

constexpr double kTol = 1e-8;

// Pairs of operand shapes: equal, and broadcasting both ways.
const std::vector<std::pair<Shape, Shape>>& ShapePairs() {
  static const auto* pairs = new std::vector<std::pair<Shape, Shape>>{
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {3, 1}}, {{4}, {2, 4}}, {{2, 3}, {}}};
  return *pairs;
}

using BinaryOp = absl::StatusOr<DTensor> (*)(const DTensor&, const DTensor&);
using ScalarOp = absl::StatusOr<DTensor> (*)(const DTensor&, double);
using UnaryOp = absl::StatusOr<DTensor> (*)(const DTensor&);

// `f(a, b)` on each shape pair, operands in [low, high).
void AddBinary(std::vector<GradCase>& cases, const std::string& op, BinaryOp f,
               double low, double high, std::mt19937& rng) {
  for (const auto& [a, b] : ShapePairs()) {
    cases.push_back({op,
                     ShapeToString(a) + " with " + ShapeToString(b),
                     {Random64(a, low, high, rng), Random64(b, low, high, rng)},
                     [f](const In& in) { return f(in[0], in[1]); }});
  }
}

// a * (cmp(a, b) as 0/1): the comparison passes no gradient.
void AddComparison(std::vector<GradCase>& cases, const std::string& op,
                   BinaryOp cmp, std::mt19937& rng) {
  cases.push_back({op,
                   "a * cmp(a, b)",
                   {Random64({3, 4}, -1, 1, rng), Random64({4}, -1, 1, rng)},
                   [cmp](const In& in) -> absl::StatusOr<DTensor> {
                     DT_ASSIGN_OR_RETURN(DTensor mask, cmp(in[0], in[1]));
                     DT_ASSIGN_OR_RETURN(mask, ops::To(mask, DType::kF64));
                     return ops::Mul(in[0], mask);
                   }});
}

void AddScalarComparison(std::vector<GradCase>& cases, const std::string& op,
                         ScalarOp cmp, std::mt19937& rng) {
  cases.push_back({op,
                   "a * cmp(a, 0.1)",
                   {Random64({2, 5}, -1, 1, rng)},
                   [cmp](const In& in) -> absl::StatusOr<DTensor> {
                     DT_ASSIGN_OR_RETURN(DTensor mask, cmp(in[0], 0.1));
                     DT_ASSIGN_OR_RETURN(mask, ops::To(mask, DType::kF64));
                     return ops::Mul(in[0], mask);
                   }});
}

void AddScalar(std::vector<GradCase>& cases, const std::string& op, ScalarOp f,
               double other, double low, double high, std::mt19937& rng) {
  cases.push_back({op,
                   "other " + std::to_string(other),
                   {Random64({3, 4}, low, high, rng)},
                   [f, other](const In& in) { return f(in[0], other); }});
}

void AddUnary(std::vector<GradCase>& cases, const std::string& op, UnaryOp f,
              double low, double high, std::mt19937& rng) {
  for (const Shape& shape : {Shape{3, 4}, Shape{}}) {
    cases.push_back({op,
                     ShapeToString(shape),
                     {Random64(shape, low, high, rng)},
                     [f](const In& in) { return f(in[0]); }});
  }
}

std::vector<GradCase> Cases() {
  std::mt19937 rng(7);
  std::vector<GradCase> cases;
  AddBinary(cases, "add", ops::Add, -2, 2, rng);
  AddBinary(cases, "sub", ops::Sub, -2, 2, rng);
  AddBinary(cases, "mul", ops::Mul, -2, 2, rng);
  AddBinary(cases, "div", ops::Div, 0.5, 2, rng);
  AddBinary(cases, "pow", ops::Pow, 0.5, 2, rng);
  AddBinary(cases, "silu_backward", ops::SiluBackward, -3, 3, rng);
  AddBinary(cases, "maximum", ops::Maximum, -2, 2, rng);
  AddBinary(cases, "minimum", ops::Minimum, -2, 2, rng);
  AddComparison(cases, "eq", ops::Eq, rng);
  AddComparison(cases, "ne", ops::Ne, rng);
  AddComparison(cases, "lt", ops::Lt, rng);
  AddComparison(cases, "le", ops::Le, rng);
  AddComparison(cases, "gt", ops::Gt, rng);
  AddComparison(cases, "ge", ops::Ge, rng);
  AddScalar(cases, "add_scalar", ops::Add, 1.5, -2, 2, rng);
  AddScalar(cases, "sub_scalar", ops::Sub, 1.5, -2, 2, rng);
  AddScalar(cases, "mul_scalar", ops::Mul, -2.5, -2, 2, rng);
  AddScalar(cases, "div_scalar", ops::Div, 3, -2, 2, rng);
  AddScalar(cases, "pow_scalar", ops::Pow, 2.5, 0.5, 2, rng);
  AddScalar(cases, "pow_scalar", ops::Pow, -1.5, 0.5, 2, rng);
  AddScalar(cases, "pow_scalar", ops::Pow, 0, 0.5, 2, rng);
  AddScalarComparison(cases, "eq_scalar", ops::Eq, rng);
  AddScalarComparison(cases, "ne_scalar", ops::Ne, rng);
  AddScalarComparison(cases, "lt_scalar", ops::Lt, rng);
  AddScalarComparison(cases, "le_scalar", ops::Le, rng);
  AddScalarComparison(cases, "gt_scalar", ops::Gt, rng);
  AddScalarComparison(cases, "ge_scalar", ops::Ge, rng);
  AddUnary(cases, "neg", ops::Neg, -2, 2, rng);
  AddUnary(cases, "abs", ops::Abs, -2, 2, rng);
  AddUnary(cases, "exp", ops::Exp, -2, 2, rng);
  AddUnary(cases, "log", ops::Log, 0.5, 3, rng);
  AddUnary(cases, "sqrt", ops::Sqrt, 0.5, 3, rng);
  AddUnary(cases, "rsqrt", ops::Rsqrt, 0.5, 3, rng);
  AddUnary(cases, "relu", ops::Relu, -2, 2, rng);
  AddUnary(cases, "silu", ops::Silu, -3, 3, rng);
  AddUnary(cases, "sigmoid", ops::Sigmoid, -3, 3, rng);
  AddUnary(cases, "tanh", ops::Tanh, -2, 2, rng);
  for (GeluApproximation approximation :
       {GeluApproximation::kNone, GeluApproximation::kTanh}) {
    cases.push_back({"gelu",
                     approximation == GeluApproximation::kTanh ? "tanh" : "erf",
                     {Random64({3, 4}, -3, 3, rng)},
                     [approximation](const In& in) {
                       return ops::Gelu(in[0], approximation);
                     }});
  }
  // cond, a, b broadcast together.
  cases.push_back(
      {"where",
       "cond [3, 4], a [4], b [3, 1]",
       {testing_util::RandomMask({3, 4}, rng), Random64({4}, -2, 2, rng),
        Random64({3, 1}, -2, 2, rng)},
       [](const In& in) { return ops::Where(in[0], in[1], in[2]); }});
  cases.push_back({"swiglu",
                   "[3, 4]",
                   {Random64({3, 4}, -3, 3, rng), Random64({3, 4}, -2, 2, rng)},
                   [](const In& in) { return ops::SwiGlu(in[0], in[1]); }});
  // Both outputs, weighted apart, so that each one's backward counts.
  cases.push_back({"swiglu_backward",
                   "d/da + 2 d/db, [2, 5]",
                   {Random64({2, 5}, -2, 2, rng), Random64({2, 5}, -3, 3, rng),
                    Random64({2, 5}, -2, 2, rng)},
                   [](const In& in) -> absl::StatusOr<DTensor> {
                     DT_ASSIGN_OR_RETURN(
                         ops::SwiGluGradients grads,
                         ops::SwiGluBackward(in[0], in[1], in[2]));
                     DT_ASSIGN_OR_RETURN(DTensor db, ops::Mul(grads.b, 2.0));
                     return ops::Add(grads.a, db);
                   }});
  return cases;
}

TEST(ElementwiseGradTest, EveryOpIsCovered) {
  const std::vector<std::string> missing =
      testing_util::Uncovered(ops::ElementwiseOps(), Cases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
}

TEST(ElementwiseGradTest, GradientsMatchFiniteDifferencesAndShardings) {
  const absl::Status status = CheckGradCases(Cases(), 11, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
