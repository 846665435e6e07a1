// The gradient tape: differentiable redistributions, NoGrad, intermediate
// and unconnected sources, ties, dtype conversions, nesting, errors, the
// collectives of gradients of Partial layouts (metadata-only), and gradient
// accumulation. References are plain loops written here.
#include "dtensor/nn/autograd.h"

#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd_accumulate.h"
#include "dtensor/nn/optim_sgd.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/registry.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/runtime.h"
#include "dtensor/testing/grad_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using nn::GradientOptions;
using nn::GradientTape;
using testing_util::Random64;

using RankFn = std::function<absl::Status(std::shared_ptr<Runtime> runtime,
                                          const DeviceMesh& mesh)>;

// Runs `fn` on every rank of an in-process mesh of `mesh_shape`.
absl::Status RunRanks(const std::vector<int64_t>& mesh_shape,
                      const RankFn& fn) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  LocalCluster cluster(mesh.size());
  return cluster.Run([&](ProcessGroups& groups) {
    return fn(Runtime::ForRank(groups), mesh);
  });
}

std::vector<double> Values(const Tensor& t) {
  return t.To(DType::kF64)->Contiguous().ToVector<double>().value();
}

// An error naming `what` unless `got` and `want` agree elementwise.
absl::Status ExpectNear(const std::vector<double>& got,
                        const std::vector<double>& want, const char* what,
                        double tol = 1e-12) {
  if (got.size() != want.size()) {
    return absl::InternalError(absl::StrCat(what, ": ", got.size(),
                                            " values, expected ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
      return absl::InternalError(
          absl::StrCat(what, "[", i, "] is ", got[i], ", expected ", want[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectFull(const DTensor& grad, const std::vector<double>& want,
                        const char* what, double tol = 1e-12) {
  DT_ASSIGN_OR_RETURN(Tensor full, grad.FullTensor());
  return ExpectNear(Values(full), want, what, tol);
}

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
      RunRanks({4}, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunRanks({2}, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunRanks({2, 2}, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunRanks({1}, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunRanks({3}, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunRanks({1}, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunRanks({1}, [&](auto runtime, auto& mesh) -> absl::Status {
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

// The collectives of taking one gradient, seen by rank 0 of a metadata-only
// mesh of 4: loss = sum(linear(x, W)) with x [8, 16] batch-sharded.
CommCounter GradientCollectives(
    const std::vector<Placement>& weight_placements) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const auto meta = [&](const Shape& shape, std::vector<Placement> sharding) {
    return *DTensor::FromSpec(
        runtime, *DTensorSpec::Create(mesh, sharding, shape, DType::kF32));
  };
  const DTensor x = meta({8, 16}, {Placement::Shard(0)});
  const DTensor w = meta({4, 16}, weight_placements);
  GradientTape tape;
  DTensor loss;
  {
    GradientTape::Scope scope(tape);
    const DTensor y = *ops::Linear(x, w);
    loss = *ops::Sum(y);
  }
  CommCounter comms;
  CommCounter::Scope scope(comms);
  const std::vector<DTensor> grads = *tape.Gradient(loss, {w});
  EXPECT_EQ(grads[0].placements(), weight_placements);
  return comms;
}

TEST(GradientTapeTest, PartialGradientOfAReplicateWeightIsAllReduced) {
  const CommCounter comms = GradientCollectives({Placement::Replicate()});
  EXPECT_EQ(comms.count(CommKind::kAllReduce), 1);
  EXPECT_EQ(comms.total_collectives(), 1);
}

TEST(GradientTapeTest, PartialGradientOfAShardWeightIsReduceScattered) {
  const CommCounter comms = GradientCollectives({Placement::Shard(0)});
  EXPECT_EQ(comms.count(CommKind::kReduceScatter), 1);
  EXPECT_EQ(comms.total_collectives(), 1);
}

// A metadata-only DTensor seen by rank 0 of `mesh`.
DTensor Meta(const std::shared_ptr<Runtime>& runtime, const DeviceMesh& mesh,
             const Shape& shape, std::vector<Placement> sharding,
             DType dtype = DType::kF32) {
  return *DTensor::FromSpec(runtime,
                            *DTensorSpec::Create(mesh, sharding, shape, dtype));
}

TEST(GradientTapeTest, TensorParallelMlpBackwardNeedsNoCollectiveForWeights) {
  // Megatron: W1 column-parallel, W2 row-parallel; only dx (a Partial sum)
  // needs an all-reduce, and only when x is asked for.
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const DTensor x = Meta(runtime, mesh, {8, 16}, {Placement::Replicate()});
  const DTensor w1 = Meta(runtime, mesh, {32, 16}, {Placement::Shard(0)});
  const DTensor w2 = Meta(runtime, mesh, {16, 32}, {Placement::Shard(1)});
  GradientTape tape;
  DTensor loss;
  {
    GradientTape::Scope scope(tape);
    const DTensor h = *ops::Relu(*ops::Linear(x, w1));
    loss = *ops::Sum(*ops::Linear(h, w2));
  }
  CommCounter weights_only;
  {
    CommCounter::Scope scope(weights_only);
    const std::vector<DTensor> grads = *tape.Gradient(loss, {w1, w2});
    EXPECT_EQ(grads[0].sharding(), w1.sharding());
    EXPECT_EQ(grads[1].sharding(), w2.sharding());
  }
  EXPECT_EQ(weights_only.total_collectives(), 0);
  CommCounter with_input;
  {
    CommCounter::Scope scope(with_input);
    ASSERT_TRUE(tape.Gradient(loss, {w1, w2, x}).ok());
  }
  EXPECT_EQ(with_input.count(CommKind::kAllReduce), 1);
  EXPECT_EQ(with_input.total_collectives(), 1);
}

TEST(GradientTapeTest, CompleteAndPartialGradientsAccumulate) {
  // x feeds a column-parallel matmul (its gradient comes back Partial over
  // the last mesh dim) and a product with a replicated w (a Replicate
  // gradient): dx = c wt^T + w, whichever of the two meets the other first,
  // with the complete term counted once.
  std::mt19937 rng(5);
  const int64_t n = 6, k = 5, m = 8;
  const Tensor x = Random64({n, k}, -1, 1, rng);
  const Tensor w = Random64({n, k}, -1, 1, rng);
  const Tensor wt = Random64({k, m}, -1, 1, rng);
  const Tensor c = Random64({n, m}, -1, 1, rng);
  const std::vector<double> ws = Values(w), wts = Values(wt), cs = Values(c);
  std::vector<double> want(n * k);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double sum = ws[i * k + j];
      for (int64_t l = 0; l < m; ++l) sum += cs[i * m + l] * wts[j * m + l];
      want[i * k + j] = sum;
    }
  }
  for (const std::vector<int64_t>& mesh_shape :
       {std::vector<int64_t>{2}, std::vector<int64_t>{2, 2}}) {
    for (const bool matmul_first : {true, false}) {
      for (const bool keep : {true, false}) {
        SCOPED_TRACE(absl::StrCat("mesh ", mesh_shape.size(), "-D, matmul ",
                                  matmul_first ? "first" : "last", ", keep ",
                                  keep));
        const absl::Status status =
            RunRanks(mesh_shape, [&](auto runtime, auto& mesh) -> absl::Status {
              const std::vector<Placement> replicated(mesh.ndim());
              std::vector<Placement> columns = replicated;
              columns.back() = Placement::Shard(1);
              DT_ASSIGN_OR_RETURN(
                  DTensor x0,
                  DTensor::Distribute(runtime, x, mesh, replicated));
              DT_ASSIGN_OR_RETURN(
                  DTensor w0,
                  DTensor::Distribute(runtime, w, mesh, replicated));
              DT_ASSIGN_OR_RETURN(
                  DTensor wt0, DTensor::Distribute(runtime, wt, mesh, columns));
              DT_ASSIGN_OR_RETURN(
                  DTensor c0,
                  DTensor::Distribute(runtime, c, mesh, replicated));
              GradientTape tape;
              DTensor loss;
              {
                GradientTape::Scope scope(tape);
                auto through_matmul = [&]() -> absl::StatusOr<DTensor> {
                  DT_ASSIGN_OR_RETURN(DTensor h, ops::Matmul(x0, wt0));
                  DT_ASSIGN_OR_RETURN(h, ops::Mul(h, c0));
                  return ops::Sum(h);
                };
                auto through_product = [&]() -> absl::StatusOr<DTensor> {
                  DT_ASSIGN_OR_RETURN(DTensor p, ops::Mul(x0, w0));
                  return ops::Sum(p);
                };
                DTensor first, second;
                if (matmul_first) {
                  DT_ASSIGN_OR_RETURN(first, through_matmul());
                  DT_ASSIGN_OR_RETURN(second, through_product());
                } else {
                  DT_ASSIGN_OR_RETURN(first, through_product());
                  DT_ASSIGN_OR_RETURN(second, through_matmul());
                }
                DT_ASSIGN_OR_RETURN(loss, ops::Add(first, second));
              }
              GradientOptions options;
              options.keep_propagated_shardings = keep;
              DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                                  tape.Gradient(loss, {x0}, options));
              std::vector<Placement> expected = replicated;
              if (keep) expected.back() = Placement::Partial();
              EXPECT_EQ(grads[0].placements(), expected);
              return ExpectFull(grads[0], want, "dx");
            });
        EXPECT_TRUE(status.ok()) << status;
      }
    }
  }
}

TEST(GradientTapeTest, LossParallelBackwardKeepsTheClassesSharded) {
  // Class-sharded logits: the backward reuses the forward's log-sum-exp and
  // count, so it communicates nothing, and the gradient stays class-sharded.
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const DTensor logits = Meta(runtime, mesh, {8, 64}, {Placement::Shard(1)});
  const DTensor target =
      Meta(runtime, mesh, {8}, {Placement::Replicate()}, DType::kI64);
  GradientTape tape;
  DTensor loss;
  {
    GradientTape::Scope scope(tape);
    loss = *ops::CrossEntropy(logits, target);
  }
  CommCounter comms;
  {
    CommCounter::Scope scope(comms);
    const std::vector<DTensor> grads = *tape.Gradient(loss, {logits});
    EXPECT_EQ(grads[0].sharding(), logits.sharding());
  }
  EXPECT_EQ(comms.total_collectives(), 0);
}

TEST(GradientAccumulationTest, AccumulatedGradientsAreTheSum) {
  std::mt19937 rng(5);
  const Tensor x1 = Random64({4, 3}, -1, 1, rng);
  const Tensor x2 = Random64({4, 3}, -1, 1, rng);
  const Tensor w = Random64({4, 3}, -1, 1, rng);
  const std::vector<double> a = Values(x1), b = Values(x2);
  const absl::Status status =
      RunRanks({2}, [&](auto runtime, auto& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            DTensor w0,
            DTensor::Distribute(runtime, w, mesh, {Placement::Shard(1)}));
        std::vector<DTensor> accumulated;
        for (const Tensor& x : {x1, x2}) {
          DT_ASSIGN_OR_RETURN(
              DTensor xs,
              DTensor::Distribute(runtime, x, mesh, {Placement::Shard(0)}));
          GradientTape tape;
          DTensor loss;
          {
            GradientTape::Scope scope(tape);
            DT_ASSIGN_OR_RETURN(DTensor product, ops::Mul(xs, w0));
            DT_ASSIGN_OR_RETURN(loss, ops::Sum(product));
          }
          DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                              tape.Gradient(loss, {w0, DTensor(w0)}));
          // The second entry is dropped: an undefined gradient leaves it.
          grads[1] = DTensor();
          DT_RETURN_IF_ERROR(nn::AccumulateGradients(&accumulated, grads));
        }
        std::vector<double> want;
        for (size_t i = 0; i < a.size(); ++i) want.push_back(a[i] + b[i]);
        DT_RETURN_IF_ERROR(ExpectFull(accumulated[0], want, "accumulated"));
        EXPECT_FALSE(accumulated[1].defined());
        EXPECT_FALSE(nn::AccumulateGradients(&accumulated, {w0}).ok());
        nn::ZeroGradients(&accumulated);
        EXPECT_EQ(accumulated.size(), 2);
        EXPECT_FALSE(accumulated[0].defined());
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// Data parallel with 2 micro-batches, seen by rank 0 of a metadata-only mesh
// of 4: the all-reduces of the weight's gradient, through accumulation and
// the optimizer step.
int64_t AllReducesOfAccumulatedSteps(bool keep_propagated_shardings) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const auto meta = [&](const Shape& shape, std::vector<Placement> sharding) {
    return *DTensor::FromSpec(
        runtime, *DTensorSpec::Create(mesh, sharding, shape, DType::kF32));
  };
  const DTensor w = meta({4, 16}, {Placement::Replicate()});
  std::unique_ptr<nn::Sgd> sgd = *nn::Sgd::Create({w}, {});
  CommCounter comms;
  CommCounter::Scope scope(comms);
  std::vector<DTensor> accumulated;
  for (int step = 0; step < 2; ++step) {
    const DTensor x = meta({8, 16}, {Placement::Shard(0)});
    GradientTape tape;
    DTensor loss;
    {
      GradientTape::Scope recording(tape);
      loss = *ops::Sum(*ops::Linear(x, w));
    }
    // The loss's own Partial is not reduced: only the gradient's are.
    GradientOptions options;
    options.keep_propagated_shardings = keep_propagated_shardings;
    EXPECT_TRUE(nn::AccumulateGradients(&accumulated,
                                        *tape.Gradient(loss, {w}, options))
                    .ok());
  }
  EXPECT_TRUE(sgd->Step(accumulated).ok());
  return comms.count(CommKind::kAllReduce);
}

TEST(GradientAccumulationTest, PartialGradientsAreReducedOnceAtTheStep) {
  EXPECT_EQ(AllReducesOfAccumulatedSteps(/*keep_propagated_shardings=*/true),
            1);
  EXPECT_EQ(AllReducesOfAccumulatedSteps(/*keep_propagated_shardings=*/false),
            2);
}

}  // namespace
}  // namespace dtensor
