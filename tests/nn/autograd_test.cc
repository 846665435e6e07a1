// The gradient tape: differentiable redistributions, NoGrad, intermediate
// and unconnected sources, ties, dtype conversions, nesting, errors, and a
// backward for every registry op. References are plain loops written here.
#include "dtensor/nn/autograd.h"

#include <memory>
#include <random>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/registry.h"
#include "dtensor/runtime.h"
#include "dtensor/testing/grad_checks.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace {

using nn::GradientOptions;
using nn::GradientTape;
using nn_testing::ExpectFull;
using nn_testing::RunOnMesh;
using nn_testing::Values;
using testing_util::Random64;

// Replicate on every mesh dim of a 1-D and a 2-D mesh.
const std::vector<Placement> kR = {Placement::Replicate()};
const std::vector<Placement> kRR = {Placement::Replicate(),
                                    Placement::Replicate()};

TEST(GradientTapeTest, RedistributeIsDifferentiable) {
  std::mt19937 rng(1);
  const Tensor x = Random64({8, 3}, -1, 1, rng);
  const Tensor w = Random64({8, 3}, -1, 1, rng);
  const std::vector<double> xs = Values(x), ws = Values(w);
  const absl::Status status =
      RunOnMesh({4}, [&](auto runtime, auto& mesh) -> absl::Status {
        // S(0) -> R, then loss = sum(y * y * w): dx = 2 x w, in S(0).
        DT_ASSIGN_OR_RETURN(
            DTensor x0,
            DTensor::Distribute(runtime, x, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(DTensor w0,
                            DTensor::Distribute(runtime, w, mesh, kR));
        GradientTape tape;
        DTensor loss;
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(DTensor y, x0.Redistribute(kR));
          DT_ASSIGN_OR_RETURN(DTensor y2, ops::Mul(y, y));
          DT_ASSIGN_OR_RETURN(DTensor weighted, ops::Mul(y2, w0));
          DT_ASSIGN_OR_RETURN(loss, ops::Sum(weighted));
        }
        EXPECT_EQ(tape.num_records(), 4);
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                            tape.Gradient(loss, {x0}));
        EXPECT_EQ(grads[0].sharding(), x0.sharding());
        std::vector<double> want(xs.size());
        for (size_t i = 0; i < xs.size(); ++i) want[i] = 2 * xs[i] * ws[i];
        DT_RETURN_IF_ERROR(ExpectFull(grads[0], want, "dx through S(0) -> R"));

        // R -> Partial(sum): the value is unchanged, so d sum(y * w) / dx = w,
        // and the gradient of the Partial y is Replicate.
        DT_ASSIGN_OR_RETURN(DTensor x1,
                            DTensor::Distribute(runtime, x, mesh, kR));
        GradientTape partial_tape;
        DTensor y;
        {
          GradientTape::Scope scope(partial_tape);
          DT_ASSIGN_OR_RETURN(y, x1.Redistribute({Placement::Partial()}));
          DT_ASSIGN_OR_RETURN(DTensor weighted, ops::Mul(y, w0));
          DT_ASSIGN_OR_RETURN(loss, ops::Sum(weighted));
        }
        DT_ASSIGN_OR_RETURN(grads, partial_tape.Gradient(loss, {x1, y}));
        for (const DTensor& g : grads) {
          EXPECT_EQ(g.placements(), kR);
          DT_RETURN_IF_ERROR(ExpectFull(g, ws, "dx through R -> P"));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, NoGradPausesRecording) {
  std::mt19937 rng(2);
  const Tensor x = Random64({5}, -1, 1, rng);
  const std::vector<double> xs = Values(x);
  const absl::Status status =
      RunOnMesh({2}, [&](auto runtime, auto& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            DTensor x0,
            DTensor::Distribute(runtime, x, mesh, {Placement::Shard(0)}));
        GradientTape tape;
        DTensor loss;
        EXPECT_FALSE(nn::IsRecording());
        {
          GradientTape::Scope scope(tape);
          EXPECT_TRUE(nn::IsRecording());
          DT_ASSIGN_OR_RETURN(DTensor square, ops::Mul(x0, x0));
          DTensor constant;
          {
            nn::NoGrad no_grad;
            EXPECT_FALSE(nn::IsRecording());
            DT_ASSIGN_OR_RETURN(constant, ops::Mul(x0, 3.0));
          }
          EXPECT_TRUE(nn::IsRecording());
          DT_ASSIGN_OR_RETURN(DTensor sum, ops::Add(square, constant));
          DT_ASSIGN_OR_RETURN(loss, ops::Sum(sum));
        }
        EXPECT_FALSE(nn::IsRecording());
        EXPECT_EQ(tape.num_records(), 3);
        // The NoGrad product is a constant: d loss / dx = 2x only.
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                            tape.Gradient(loss, {x0}));
        std::vector<double> want;
        for (double v : xs) want.push_back(2 * v);
        DT_RETURN_IF_ERROR(ExpectFull(grads[0], want, "dx"));
        // Gradient records nothing itself.
        EXPECT_EQ(tape.num_records(), 3);
        tape.Clear();
        EXPECT_EQ(tape.num_records(), 0);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, IntermediateUnconnectedAndTargetSources) {
  std::mt19937 rng(3);
  const Tensor x = Random64({3, 4}, -1, 1, rng);
  const Tensor w = Random64({3, 4}, -1, 1, rng);
  const std::vector<double> xs = Values(x), ws = Values(w);
  const absl::Status status =
      RunOnMesh({2, 2}, [&](auto runtime, auto& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            DTensor x0,
            DTensor::Distribute(runtime, x, mesh,
                                {Placement::Shard(1), Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(
            DTensor w0,
            DTensor::Distribute(runtime, w, mesh,
                                {Placement::Replicate(), Placement::Shard(1)}));
        DT_ASSIGN_OR_RETURN(
            DTensor unrelated,
            DTensor::Distribute(runtime, w, mesh,
                                {Placement::Shard(0), Placement::Replicate()}));
        DT_ASSIGN_OR_RETURN(Tensor counts,
                            Tensor::FromVector<int64_t>({1, 2, 3}, {3}));
        DT_ASSIGN_OR_RETURN(DTensor integer,
                            DTensor::Distribute(runtime, counts, mesh, kRR));
        GradientTape tape;
        DTensor y, loss;
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(y, ops::Mul(x0, w0));
          DT_ASSIGN_OR_RETURN(DTensor y2, ops::Mul(y, y));
          DT_ASSIGN_OR_RETURN(loss, ops::Sum(y2));
        }
        // loss = sum((x w)^2): dy = 2y, dx = 2 y w, d loss / d loss = 1; the
        // unrelated and integer sources get zeros in their layouts.
        DT_ASSIGN_OR_RETURN(
            std::vector<DTensor> grads,
            tape.Gradient(loss, {y, x0, loss, unrelated, integer}));
        std::vector<double> dy, dx;
        for (size_t i = 0; i < xs.size(); ++i) {
          dy.push_back(2 * xs[i] * ws[i]);
          dx.push_back(2 * xs[i] * ws[i] * ws[i]);
        }
        DT_RETURN_IF_ERROR(ExpectFull(grads[0], dy, "dy"));
        DT_RETURN_IF_ERROR(ExpectFull(grads[1], dx, "dx"));
        DT_RETURN_IF_ERROR(ExpectFull(grads[2], {1.0}, "dloss"));
        DT_RETURN_IF_ERROR(
            ExpectFull(grads[3], std::vector<double>(12, 0.0), "unrelated"));
        DT_RETURN_IF_ERROR(
            ExpectFull(grads[4], std::vector<double>(3, 0.0), "integer"));
        EXPECT_EQ(grads[1].sharding(), x0.sharding());
        EXPECT_EQ(grads[3].sharding(), unrelated.sharding());
        EXPECT_EQ(grads[4].dtype(), DType::kI64);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, TiesSplitTheGradientEvenly) {
  const absl::Status status =
      RunOnMesh({1}, [&](auto runtime, auto& mesh) -> absl::Status {
        const auto make = [&](std::vector<double> values) {
          const int64_t n = static_cast<int64_t>(values.size());
          return DTensor::FromLocal(runtime, *Tensor::FromVector(values, {n}),
                                    mesh, kR);
        };
        DT_ASSIGN_OR_RETURN(DTensor x, make({1, 3, 3, 2}));
        DT_ASSIGN_OR_RETURN(DTensor a, make({1, 2, 3}));
        DT_ASSIGN_OR_RETURN(DTensor b, make({1, 0, 4}));
        GradientTape tape;
        DTensor top, larger;
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(top, ops::Amax(x));
          DT_ASSIGN_OR_RETURN(DTensor pairwise, ops::Maximum(a, b));
          DT_ASSIGN_OR_RETURN(larger, ops::Sum(pairwise));
        }
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                            tape.Gradient(top, {x}));
        DT_RETURN_IF_ERROR(ExpectFull(grads[0], {0, 0.5, 0.5, 0}, "d amax"));
        DT_ASSIGN_OR_RETURN(grads, tape.Gradient(larger, {a, b}));
        DT_RETURN_IF_ERROR(ExpectFull(grads[0], {0.5, 1, 0}, "d maximum / da"));
        DT_RETURN_IF_ERROR(ExpectFull(grads[1], {0.5, 0, 1}, "d maximum / db"));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, GradientsFollowDtypeConversions) {
  std::mt19937 rng(4);
  const Tensor x = Random64({6}, -1, 1, rng);
  const std::vector<double> xs = Values(x);
  const absl::Status status =
      RunOnMesh({3}, [&](auto runtime, auto& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            DTensor x0,
            DTensor::Distribute(runtime, x, mesh, {Placement::Shard(0)}));
        GradientTape tape;
        DTensor loss;
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(DTensor narrow, ops::To(x0, DType::kF32));
          DT_ASSIGN_OR_RETURN(DTensor square, ops::Mul(narrow, narrow));
          DT_ASSIGN_OR_RETURN(loss, ops::Sum(square));
        }
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                            tape.Gradient(loss, {x0}));
        EXPECT_EQ(grads[0].dtype(), DType::kF64);
        std::vector<double> want;
        for (double v : xs) want.push_back(2 * v);
        return ExpectFull(grads[0], want, "dx through f32", 1e-6);
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, ScopesNestAcrossTapes) {
  const absl::Status status =
      RunOnMesh({1}, [&](auto runtime, auto& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor ones, Tensor::Ones({2}, DType::kF64));
        DT_ASSIGN_OR_RETURN(DTensor x,
                            DTensor::FromLocal(runtime, ones, mesh, kR));
        GradientTape outer, inner;
        {
          GradientTape::Scope a(outer);
          DT_RETURN_IF_ERROR(ops::Neg(x).status());
          {
            GradientTape::Scope b(inner);
            GradientTape::Scope again(outer);
            DT_RETURN_IF_ERROR(ops::Exp(x).status());
          }
          DT_RETURN_IF_ERROR(ops::Abs(x).status());
        }
        DT_RETURN_IF_ERROR(ops::Neg(x).status());
        // The outer tape records each of its three ops once.
        EXPECT_EQ(outer.num_records(), 3);
        EXPECT_EQ(inner.num_records(), 1);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, ErrorsNameTheProblem) {
  const absl::Status status =
      RunOnMesh({1}, [&](auto runtime, auto& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor ones, Tensor::Ones({3}, DType::kF64));
        DT_ASSIGN_OR_RETURN(DTensor x,
                            DTensor::FromLocal(runtime, ones, mesh, kR));
        // Add without its backward.
        DT_ASSIGN_OR_RETURN(const OpDef* add,
                            OpRegistry::Builtin().Find("add"));
        OpDef no_backward = *add;
        no_backward.backward = nullptr;
        GradientTape tape;
        DTensor y, opaque;
        {
          GradientTape::Scope scope(tape);
          DT_ASSIGN_OR_RETURN(y, ops::Exp(x));
          const DTensor* in[] = {&x, &x};
          DT_ASSIGN_OR_RETURN(opaque, DispatchOne(no_backward, in, OpArgs()));
        }
        absl::Status s = tape.Gradient(y, {x}).status();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        EXPECT_NE(s.message().find("[3]"), std::string::npos) << s;
        GradientOptions wrong;
        DT_ASSIGN_OR_RETURN(wrong.output_gradient, ops::ScalarLike(x, 1));
        s = tape.Gradient(y, {x}, wrong).status();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        GradientOptions y_grad;
        DT_ASSIGN_OR_RETURN(y_grad.output_gradient, ops::FullLike(y, 1));
        s = tape.Gradient(y, {x, DTensor()}, y_grad).status();
        EXPECT_NE(s.message().find("source 1"), std::string::npos) << s;
        s = tape.Gradient(DTensor(), {x}).status();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        GradientOptions ones_grad;
        DT_ASSIGN_OR_RETURN(ones_grad.output_gradient,
                            ops::FullLike(opaque, 1));
        s = tape.Gradient(opaque, {x}, ones_grad).status();
        EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
        EXPECT_NE(s.message().find("add"), std::string::npos) << s;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientTapeTest, EveryRegistryOpHasABackward) {
  for (const OpDef* op : OpRegistry::Builtin().ops()) {
    EXPECT_TRUE(static_cast<bool>(op->backward)) << op->name;
  }
}

}  // namespace
}  // namespace dtensor
