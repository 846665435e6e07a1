// The collectives of gradients: Partial gradients of Replicate and Shard
// weights, tensor-parallel and loss-parallel backward (metadata-only), and
// gradient accumulation across micro-batches and the optimizer step.
// References are plain loops written here.
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/autograd_accumulate.h"
#include "dtensor/nn/optim_sgd.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/vocab_ops.h"
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
        const absl::Status status = RunOnMesh(
            mesh_shape, [&](auto runtime, auto& mesh) -> absl::Status {
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
      RunOnMesh({2}, [&](auto runtime, auto& mesh) -> absl::Status {
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
