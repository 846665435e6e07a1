// Gradients of the view, join, slice, cast and random ops: against finite
// differences in f64 on one rank, and on random layouts of in-process meshes
// against the one-rank gradients (dtensor/testing/grad_checks.h). Every op of
// these families is covered.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/join_ops.h"
#include "dtensor/ops/random_ops.h"
#include "dtensor/ops/slice_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/testing/grad_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckGradCases;
using testing_util::GradCase;
using testing_util::Random64;
using In = std::vector<DTensor>;

constexpr double kTol = 1e-8;

std::vector<GradCase> ViewCases() {
  std::mt19937 rng(13);
  std::vector<GradCase> cases;
  const auto one =
      [&](const std::string& op, const std::string& description,
          const Shape& shape,
          std::function<absl::StatusOr<DTensor>(const DTensor&)> f) {
        cases.push_back(
            {op, description, {Random64(shape, -1, 1, rng)}, [f](const In& in) {
               return f(in[0]);
             }});
      };
  one("view", "[4, 6] -> [2, 12]", {4, 6}, [](const DTensor& x) {
    return ops::View(x, {2, 12});
  });
  one("reshape", "[2, 3, 4] -> [6, -1]", {2, 3, 4}, [](const DTensor& x) {
    return ops::Reshape(x, {6, -1});
  });
  one("flatten", "dims 1..2", {2, 3, 2},
      [](const DTensor& x) { return ops::Flatten(x, 1, 2); });
  one("unflatten", "dim 1 -> [2, -1]", {3, 4}, [](const DTensor& x) {
    return ops::Unflatten(x, 1, {2, -1});
  });
  one("squeeze", "all size-1 dims", {3, 1, 4, 1},
      [](const DTensor& x) { return ops::Squeeze(x); });
  one("squeeze", "dim 1", {3, 1, 4, 1},
      [](const DTensor& x) { return ops::Squeeze(x, {1}); });
  one("unsqueeze", "dim -1", {3, 4},
      [](const DTensor& x) { return ops::Unsqueeze(x, -1); });
  one("transpose", "0, 2", {2, 3, 4},
      [](const DTensor& x) { return ops::Transpose(x, 0, 2); });
  one("permute", "[2, 0, 1]", {2, 3, 4}, [](const DTensor& x) {
    return ops::Permute(x, {2, 0, 1});
  });
  one("expand", "[3, 1] -> [2, 3, 4]", {3, 1}, [](const DTensor& x) {
    return ops::Expand(x, {2, 3, 4});
  });
  one("expand", "[4] -> [3, -1]", {4}, [](const DTensor& x) {
    return ops::Expand(x, {3, -1});
  });
  return cases;
}

std::vector<GradCase> JoinSliceCases() {
  std::mt19937 rng(17);
  std::vector<GradCase> cases;
  cases.push_back({"cat",
                   "three tensors along dim 1",
                   {Random64({2, 3}, -1, 1, rng), Random64({2, 1}, -1, 1, rng),
                    Random64({2, 4}, -1, 1, rng)},
                   [](const In& in) { return ops::Cat(in, 1); }});
  // More than one registry call holds (kMaxJoinInputs).
  std::vector<Tensor> pieces;
  for (int i = 0; i < ops::kMaxJoinInputs + 2; ++i) {
    pieces.push_back(Random64({1, 2}, -1, 1, rng));
  }
  cases.push_back({"cat", "18 tensors along dim 0", pieces,
                   [](const In& in) { return ops::Cat(in, 0); }});
  cases.push_back({"stack",
                   "two tensors, new dim -1",
                   {Random64({2, 3}, -1, 1, rng), Random64({2, 3}, -1, 1, rng)},
                   [](const In& in) { return ops::Stack(in, -1); }});
  const auto one =
      [&](const std::string& op, const std::string& description,
          const Shape& shape,
          std::function<absl::StatusOr<DTensor>(const DTensor&)> f) {
        cases.push_back(
            {op, description, {Random64(shape, -1, 1, rng)}, [f](const In& in) {
               return f(in[0]);
             }});
      };
  one("narrow", "dim 1 [1, 3)", {3, 5},
      [](const DTensor& x) { return ops::Narrow(x, 1, 1, 2); });
  one("narrow", "dim 0 from -2", {4, 2},
      [](const DTensor& x) { return ops::Narrow(x, 0, -2, 2); });
  one("slice", "dim 1 [1, 4) step 1", {2, 5},
      [](const DTensor& x) { return ops::Slice(x, 1, 1, 4); });
  one("slice", "dim 0 [1, end) step 3", {8, 2},
      [](const DTensor& x) { return ops::Slice(x, 0, 1, 100, 3); });
  one("slice", "dim 1 [-5, -1) step 2", {2, 7},
      [](const DTensor& x) { return ops::Slice(x, 1, -5, -1, 2); });
  one("slice", "empty", {3, 2},
      [](const DTensor& x) { return ops::Slice(x, 0, 2, 1); });
  // Split and Chunk are narrows of one layout; every part used.
  one("narrow", "split [2, 1, 2] weighted", {5, 2},
      [](const DTensor& x) -> absl::StatusOr<DTensor> {
        const int64_t sizes[] = {2, 1, 2};
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> parts,
                            ops::Split(x, sizes, 0));
        DT_ASSIGN_OR_RETURN(DTensor last, ops::Mul(parts[2], 3.0));
        return ops::Sub(parts[0], last);
      });
  one("narrow", "chunk 2 of dim 1", {2, 4},
      [](const DTensor& x) -> absl::StatusOr<DTensor> {
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> parts, ops::Chunk(x, 2, 1));
        return ops::Mul(parts[0], parts[1]);
      });
  return cases;
}

std::vector<GradCase> CastRandomCases() {
  std::mt19937 rng(19);
  std::vector<GradCase> cases;
  cases.push_back({"to",
                   "f64 -> f64, times x",
                   {Random64({3, 2}, -1, 1, rng)},
                   [](const In& in) -> absl::StatusOr<DTensor> {
                     DT_ASSIGN_OR_RETURN(DTensor same,
                                         ops::To(in[0], DType::kF64));
                     return ops::Mul(same, in[0]);
                   }});
  cases.push_back(
      {"to",
       "through i64: no gradient on that path",
       {Random64({4}, -3, 3, rng)},
       [](const In& in) -> absl::StatusOr<DTensor> {
         DT_ASSIGN_OR_RETURN(DTensor truncated, ops::To(in[0], DType::kI64));
         DT_ASSIGN_OR_RETURN(truncated, ops::To(truncated, DType::kF64));
         return ops::Add(truncated, in[0]);
       }});
  for (double p : {0.0, 0.4, 1.0}) {
    cases.push_back(
        {"dropout",
         "p " + std::to_string(p),
         {Random64({3, 5}, -1, 1, rng)},
         [p](const In& in) { return ops::Dropout(in[0], p, 99, 7); }});
  }
  return cases;
}

void ExpectCovered(const std::vector<const OpDef*>& ops,
                   const std::vector<GradCase>& cases) {
  const std::vector<std::string> missing = testing_util::Uncovered(ops, cases);
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, ", ");
}

TEST(ShapeGradTest, EveryOpIsCovered) {
  ExpectCovered(ops::ViewOps(), ViewCases());
  std::vector<const OpDef*> join_slice = ops::JoinOps();
  for (const OpDef* op : ops::SliceOps()) join_slice.push_back(op);
  ExpectCovered(join_slice, JoinSliceCases());
  std::vector<const OpDef*> cast_random = ops::CastOps();
  for (const OpDef* op : ops::RandomOps()) cast_random.push_back(op);
  ExpectCovered(cast_random, CastRandomCases());
}

TEST(ShapeGradTest, ViewGradients) {
  const absl::Status status = CheckGradCases(ViewCases(), 41, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ShapeGradTest, JoinAndSliceGradients) {
  const absl::Status status = CheckGradCases(JoinSliceCases(), 51, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ShapeGradTest, CastAndDropoutGradients) {
  const absl::Status status = CheckGradCases(CastRandomCases(), 61, 2, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
