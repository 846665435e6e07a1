// Gradients of the matmul and reduction ops: against finite differences in
// f64 on one rank, and on random layouts of in-process meshes against the
// one-rank gradients (dtensor/testing/grad_checks.h). Every op of both families
// is covered.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/testing/grad_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckGradCases;
using testing_util::GradCase;
using testing_util::Random64;
using In = std::vector<DTensor>;

constexpr double kTol = 1e-8;

std::vector<GradCase> MatmulCases() {
  std::mt19937 rng(3);
  std::vector<GradCase> cases;
  const auto matmul = [](const In& in) { return ops::Matmul(in[0], in[1]); };
  // torch.matmul's forms: vector.vector, matrix.vector, vector.matrix,
  // batched with broadcast batch dims.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4}, {4}},       {{3, 4}, {4}},       {{4}, {4, 2}},
      {{3, 4}, {4, 2}}, {{2, 3, 4}, {4, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {2, 4, 3}}, {{2, 3, 4}, {4}}};
  for (const auto& [a, b] : shapes) {
    cases.push_back({"matmul",
                     ShapeToString(a) + " @ " + ShapeToString(b),
                     {Random64(a, -1, 1, rng), Random64(b, -1, 1, rng)},
                     matmul});
  }
  cases.push_back({"mm",
                   "[5, 3] @ [3, 4]",
                   {Random64({5, 3}, -1, 1, rng), Random64({3, 4}, -1, 1, rng)},
                   [](const In& in) { return ops::Mm(in[0], in[1]); }});
  cases.push_back(
      {"bmm",
       "[2, 3, 4] @ [2, 4, 3]",
       {Random64({2, 3, 4}, -1, 1, rng), Random64({2, 4, 3}, -1, 1, rng)},
       [](const In& in) { return ops::Bmm(in[0], in[1]); }});
  const auto linear = [](const In& in) {
    return ops::Linear(in[0], in[1], in[2]);
  };
  for (const Shape& x : {Shape{3}, Shape{4, 3}, Shape{2, 4, 3}}) {
    cases.push_back({"linear",
                     "x " + ShapeToString(x) + " with bias",
                     {Random64(x, -1, 1, rng), Random64({5, 3}, -1, 1, rng),
                      Random64({5}, -1, 1, rng)},
                     linear});
  }
  cases.push_back({"linear",
                   "no bias",
                   {Random64({2, 3, 3}, -1, 1, rng),
                    Random64({4, 3}, -1, 1, rng), Tensor()},
                   linear});
  for (const auto& [g, x] : std::vector<std::pair<Shape, Shape>>{
           {{4}, {3}}, {{5, 4}, {5, 3}}, {{2, 3, 4}, {2, 3, 2}}}) {
    cases.push_back(
        {"linear_weight_grad",
         "g " + ShapeToString(g) + ", x " + ShapeToString(x),
         {Random64(g, -1, 1, rng), Random64(x, -1, 1, rng)},
         [](const In& in) { return ops::LinearWeightGrad(in[0], in[1]); }});
  }
  for (const auto& [bias, beta, alpha] :
       {std::tuple<Shape, double, double>{{4, 5}, 1, 1},
        {{5}, 0.5, -2},
        {{4, 1}, 0, 1.5}}) {
    cases.push_back({"addmm",
                     "bias " + ShapeToString(bias) + " beta " +
                         std::to_string(beta) + " alpha " +
                         std::to_string(alpha),
                     {Random64(bias, -1, 1, rng), Random64({4, 3}, -1, 1, rng),
                      Random64({3, 5}, -1, 1, rng)},
                     [beta = beta, alpha = alpha](const In& in) {
                       return ops::Addmm(in[0], in[1], in[2], beta, alpha);
                     }});
  }
  return cases;
}

using Reduction = absl::StatusOr<DTensor> (*)(const DTensor&,
                                              absl::Span<const int64_t>, bool);

std::vector<GradCase> ReductionCases() {
  std::mt19937 rng(5);
  std::vector<GradCase> cases;
  const std::vector<std::pair<std::string, Reduction>> reductions = {
      {"sum", ops::Sum},
      {"mean", ops::Mean},
      {"amax", ops::Amax},
      {"amin", ops::Amin},
      {"max", ops::Max},
      {"min", ops::Min},
      {"sum_squares", ops::SumOfSquares}};
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {1}, {0, -1}};
  for (const auto& [name, f] : reductions) {
    for (const std::vector<int64_t>& dims : dim_sets) {
      for (bool keepdim : {false, true}) {
        cases.push_back({name,
                         "dims [" + absl::StrJoin(dims, ",") + "] keepdim " +
                             std::to_string(keepdim),
                         {Random64({3, 4, 2}, -2, 2, rng)},
                         [f = f, dims = dims, keepdim](const In& in) {
                           return f(in[0], dims, keepdim);
                         }});
      }
    }
  }
  // Both outputs, or one only (the other gets no gradient).
  cases.push_back({"aminmax",
                   "min + 2 max over dim 1",
                   {Random64({3, 4}, -2, 2, rng)},
                   [](const In& in) -> absl::StatusOr<DTensor> {
                     const int64_t dims[] = {1};
                     DT_ASSIGN_OR_RETURN(auto both, ops::Aminmax(in[0], dims));
                     DT_ASSIGN_OR_RETURN(DTensor twice,
                                         ops::Mul(both.second, 2.0));
                     return ops::Add(both.first, twice);
                   }});
  cases.push_back({"aminmax",
                   "max only, all dims",
                   {Random64({2, 3}, -2, 2, rng)},
                   [](const In& in) -> absl::StatusOr<DTensor> {
                     DT_ASSIGN_OR_RETURN(auto both, ops::Aminmax(in[0]));
                     return both.second;
                   }});
  return cases;
}

TEST(MatmulGradTest, EveryOpIsCovered) {
  const std::vector<std::string> missing =
      testing_util::Uncovered(ops::MatmulOps(), MatmulCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
}

TEST(MatmulGradTest, GradientsMatchFiniteDifferencesAndShardings) {
  const absl::Status status = CheckGradCases(MatmulCases(), 21, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ReductionGradTest, EveryOpIsCovered) {
  const std::vector<std::string> missing =
      testing_util::Uncovered(ops::ReductionOps(), ReductionCases());
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
}

TEST(ReductionGradTest, GradientsMatchFiniteDifferencesAndShardings) {
  const absl::Status status = CheckGradCases(ReductionCases(), 31, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
