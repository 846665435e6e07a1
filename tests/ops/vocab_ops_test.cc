// embedding and cross_entropy on DTensors: randomized property tests (random
// meshes, even and uneven shards, ignored targets, Partial inputs) against
// the tensor layer on the gathered inputs; the row-sharded embedding's
// Partial result; errors. Loss parallel: loss_parallel_test.
#include "dtensor/ops/vocab_ops.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/embedding_ops.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

constexpr double kTol = 1e-4;

DType RandomIndexType(std::mt19937& rng) {
  return rng() % 2 == 0 ? DType::kI64 : DType::kI32;
}

// ---- Property tests: random layouts through the typed functions, and
// every strategy of the registry op. ----

// `typed` draws calls of the typed function, `registry` the same calls with
// the reference of every output of the registry op (for an op whose typed
// function returns fewer).
void CheckOp(uint32_t seed, const testing_util::OpCallMaker& typed,
             const testing_util::OpCallMaker& registry) {
  const absl::Status status = CheckOpProperties(
      seed, typed, kTol, {/*sharding_rounds=*/5, 10, 16, /*max_strategies=*/32},
      registry);
  EXPECT_TRUE(status.ok()) << status;
}

OpCall EmbeddingCall(std::mt19937& rng) {
  const int64_t num = 1 + rng() % 7;
  const int64_t dim = 1 + rng() % 5;
  OpCall c;
  c.op = "embedding";
  c.description = c.op;
  c.inputs = {
      RandomTensor(RandomShape(rng() % 3, 4, rng), RandomIndexType(rng), 0,
                   num - 1, rng),
      RandomTensor({num, dim}, rng() % 3 == 0 ? DType::kF64 : DType::kF32, -2,
                   2, rng)};
  c.call = OneOutput([](const In& in) { return ops::Embedding(in[0], in[1]); });
  c.reference =
      OneReference([](const Full& in) { return Embedding(in[0], in[1]); });
  return c;
}

TEST(VocabPropertyTest, EmbeddingMatchesTheTensorLayer) {
  CheckOp(21, EmbeddingCall, EmbeddingCall);
}

// The table gradient by brute force in double: every grad row added at its
// index.
absl::StatusOr<Tensor> ScatteredRows(const Tensor& indices, const Tensor& grad,
                                     int64_t num) {
  const std::vector<int64_t> rows = indices.ToVector<int64_t>().value();
  const std::vector<double> g = grad.ToVector<double>().value();
  const int64_t dim = grad.shape().back();
  std::vector<double> sums(num * dim, 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t j = 0; j < dim; ++j) sums[rows[i] * dim + j] += g[i * dim + j];
  }
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::FromVector(sums, {num, dim}));
  return out.To(grad.dtype());
}

OpCall EmbeddingBackwardCall(std::mt19937& rng) {
  const int64_t num = 1 + rng() % 7;
  const int64_t dim = 1 + rng() % 5;
  Shape index_shape = RandomShape(rng() % 3, 4, rng);
  Shape grad_shape = index_shape;
  grad_shape.push_back(dim);
  OpCall c;
  c.op = "embedding_backward";
  c.description = c.op;
  const DType dtype = rng() % 3 == 0 ? DType::kF64 : DType::kF32;
  // The table: only its shape and layout matter.
  c.inputs = {RandomTensor(index_shape, RandomIndexType(rng), 0, num - 1, rng),
              RandomTensor(grad_shape, dtype, -2, 2, rng),
              RandomTensor({num, dim}, dtype, -2, 2, rng)};
  c.call = OneOutput(
      [](const In& in) { return ops::EmbeddingBackward(in[0], in[1], in[2]); });
  c.reference = OneReference(
      [num](const Full& in) { return ScatteredRows(in[0], in[1], num); });
  return c;
}

TEST(VocabPropertyTest, EmbeddingBackwardMatchesScatteredRows) {
  CheckOp(23, EmbeddingBackwardCall, EmbeddingBackwardCall);
}

// Targets in [0, classes), a quarter of them `ignore_index`.
Tensor RandomTargets(const Shape& shape, int64_t classes, int64_t ignore_index,
                     DType dtype, std::mt19937& rng) {
  std::vector<int64_t> values(NumElements(shape));
  for (int64_t& v : values) {
    v = rng() % 4 == 0 ? ignore_index : static_cast<int64_t>(rng() % classes);
  }
  return *Tensor::FromVector(values, shape)->To(dtype);
}

// The registry op's outputs on full inputs: the loss (the tensor layer's),
// the count of non-ignored targets, and every row's log-sum-exp in plain
// loops in double.
absl::StatusOr<std::vector<Tensor>> CrossEntropyOutputs(const Full& in,
                                                        Reduction reduction,
                                                        int64_t ignore_index) {
  DT_ASSIGN_OR_RETURN(Tensor loss,
                      CrossEntropy(in[0], in[1], reduction, ignore_index));
  DT_ASSIGN_OR_RETURN(Tensor logits, in[0].To(DType::kF64));
  DT_ASSIGN_OR_RETURN(Tensor target, in[1].To(DType::kI64));
  logits = logits.Contiguous();
  target = target.Contiguous();
  const int64_t rows = target.numel();
  const int64_t classes = logits.shape().back();
  int64_t count = 0;
  std::vector<double> log_sum_exp(rows);
  for (int64_t i = 0; i < rows; ++i) {
    if (target.data<int64_t>()[i] != ignore_index) ++count;
    const double* row = logits.data<double>() + i * classes;
    const double max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - max);
    log_sum_exp[i] = max + std::log(sum);
  }
  DT_ASSIGN_OR_RETURN(Tensor lse,
                      Tensor::FromVector(log_sum_exp, target.shape()));
  return std::vector<Tensor>{
      std::move(loss), Tensor::Scalar(count, DType::kI64), std::move(lse)};
}

// A random call; its reference is the loss alone (the typed function's one
// output) or, with `all_outputs`, every output of the registry op.
OpCall CrossEntropyCall(std::mt19937& rng, bool all_outputs) {
  const bool batched = rng() % 4 != 0;
  const int64_t n = rng() % 8;
  const int64_t classes = 1 + rng() % 7;
  const Reduction reduction = static_cast<Reduction>(rng() % 3);
  // The default, or a real class (which then counts as ignored).
  const int64_t ignore_index =
      rng() % 2 == 0 ? -100 : static_cast<int64_t>(rng() % classes);
  OpCall c;
  c.op = "cross_entropy";
  c.description = absl::StrCat(c.op, " reduction ", static_cast<int>(reduction),
                               " ignore_index ", ignore_index);
  c.inputs = {
      RandomTensor(batched ? Shape{n, classes} : Shape{classes},
                   rng() % 3 == 0 ? DType::kF64 : DType::kF32, -3, 3, rng),
      RandomTargets(batched ? Shape{n} : Shape{}, classes, ignore_index,
                    RandomIndexType(rng), rng)};
  c.args.AddInt(static_cast<int64_t>(reduction)).AddInt(ignore_index);
  c.call = OneOutput([reduction, ignore_index](const In& in) {
    return ops::CrossEntropy(in[0], in[1], reduction, ignore_index);
  });
  if (all_outputs) {
    c.reference = [reduction, ignore_index](const Full& in) {
      return CrossEntropyOutputs(in, reduction, ignore_index);
    };
  } else {
    c.reference = OneReference([reduction, ignore_index](const Full& in) {
      return CrossEntropy(in[0], in[1], reduction, ignore_index);
    });
  }
  return c;
}

TEST(VocabPropertyTest, CrossEntropyMatchesTheTensorLayer) {
  CheckOp(
      22, [](std::mt19937& rng) { return CrossEntropyCall(rng, false); },
      [](std::mt19937& rng) { return CrossEntropyCall(rng, true); });
}

// cross_entropy_backward on full inputs in plain loops in double:
// (exp(x - lse) - onehot(target)) * grad (per row for none) / count (mean),
// 0 for ignored rows.
absl::StatusOr<Tensor> CrossEntropyGradReference(const Full& in,
                                                 Reduction reduction,
                                                 int64_t ignore_index) {
  const int64_t classes = in[0].shape().back();
  DT_ASSIGN_OR_RETURN(const std::vector<double> x, in[0].ToVector<double>());
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> t, in[1].ToVector<int64_t>());
  DT_ASSIGN_OR_RETURN(const std::vector<double> lse, in[2].ToVector<double>());
  DT_ASSIGN_OR_RETURN(const std::vector<double> g, in[3].ToVector<double>());
  double count = 1;
  if (reduction == Reduction::kMean) {
    DT_ASSIGN_OR_RETURN(const std::vector<double> c, in[4].ToVector<double>());
    count = c[0];
  }
  std::vector<double> out(x.size(), 0.0);
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore_index) continue;
    const double w = g[reduction == Reduction::kNone ? r : 0] / count;
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(x[r * classes + j] - lse[r]);
      out[r * classes + j] = (p - (j == t[r] ? 1.0 : 0.0)) * w;
    }
  }
  DT_ASSIGN_OR_RETURN(const Tensor grad,
                      Tensor::FromVector(out, in[0].shape()));
  return grad.To(in[0].dtype());
}

OpCall CrossEntropyBackwardCall(std::mt19937& rng) {
  const bool batched = rng() % 4 != 0;
  const int64_t n = rng() % 8;
  const int64_t classes = 1 + rng() % 7;
  const Reduction reduction = static_cast<Reduction>(rng() % 3);
  const int64_t ignore_index =
      rng() % 2 == 0 ? -100 : static_cast<int64_t>(rng() % classes);
  const Shape rows = batched ? Shape{n} : Shape{};
  Shape logits_shape = rows;
  logits_shape.push_back(classes);
  const DType dtype = rng() % 3 == 0 ? DType::kF64 : DType::kF32;
  OpCall c;
  c.op = "cross_entropy_backward";
  c.description = absl::StrCat(c.op, " reduction ", static_cast<int>(reduction),
                               " ignore_index ", ignore_index);
  // Any log-sum-exp: the op takes it as given.
  c.inputs = {
      RandomTensor(logits_shape, dtype, -3, 3, rng),
      RandomTargets(rows, classes, ignore_index, RandomIndexType(rng), rng),
      RandomTensor(rows, dtype, 1, 3, rng),
      RandomTensor(reduction == Reduction::kNone ? rows : Shape{}, dtype, -2, 2,
                   rng),
      reduction == Reduction::kMean ? Tensor::Scalar(1 + rng() % 9, DType::kI64)
                                    : Tensor()};
  c.args.AddInt(static_cast<int64_t>(reduction)).AddInt(ignore_index);
  c.call = OneOutput([reduction, ignore_index](const In& in) {
    return ops::CrossEntropyBackward(in[0], in[1], in[2], in[3], in[4],
                                     reduction, ignore_index);
  });
  c.reference = OneReference([reduction, ignore_index](const Full& in) {
    return CrossEntropyGradReference(in, reduction, ignore_index);
  });
  return c;
}

TEST(VocabPropertyTest, CrossEntropyBackwardMatchesLoopsOverTheRows) {
  CheckOp(24, CrossEntropyBackwardCall, CrossEntropyBackwardCall);
}

TEST(VocabCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {"embedding", "embedding_backward",
                                        "cross_entropy",
                                        "cross_entropy_backward"};
  for (const auto& family : {ops::EmbeddingOps(), ops::VocabOps()}) {
    for (const OpDef* op : family) {
      EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
    }
  }
}

// ---- Embedding layouts. ----

MetaOutcome EmbeddingOnMeta(const std::vector<int64_t>& mesh,
                            const std::string& indices,
                            const std::string& table) {
  return RunOnMeta(mesh, {{{4, 6}, indices, DType::kI64}, {{32, 16}, table}},
                   [](const In& in) { return ops::Embedding(in[0], in[1]); });
}

TEST(VocabShardingTest, RowShardedTableGivesAPartialSumWithoutCommunication) {
  MetaOutcome o = EmbeddingOnMeta({4}, "R", "S(0)");
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // Columns give the last dim; sharded indices their dims.
  o = EmbeddingOnMeta({4}, "R", "S(1)");
  EXPECT_EQ(o.sharding, "S(2)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = EmbeddingOnMeta({4}, "S(1)", "R");
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = EmbeddingOnMeta({2, 2}, "S(0),R", "R,S(0)");
  EXPECT_EQ(o.sharding, "S(0),P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

// embedding_backward gives the table's layout where the indices and grad
// allow it, without communication: a vocab-sharded table's rows, a
// column-sharded table's columns; batch-sharded indices give Partial(sum).
MetaOutcome EmbeddingBackwardOnMeta(const std::vector<int64_t>& mesh,
                                    const std::string& indices,
                                    const std::string& grad,
                                    const std::string& table) {
  return RunOnMeta(
      mesh,
      {{{4, 6}, indices, DType::kI64}, {{4, 6, 16}, grad}, {{32, 16}, table}},
      [](const In& in) { return ops::EmbeddingBackward(in[0], in[1], in[2]); });
}

TEST(VocabShardingTest, EmbeddingBackwardFollowsTheTableWithoutCommunication) {
  MetaOutcome o = EmbeddingBackwardOnMeta({4}, "R", "R", "S(0)");
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = EmbeddingBackwardOnMeta({4}, "R", "S(2)", "S(1)");
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = EmbeddingBackwardOnMeta({4}, "S(0)", "S(0)", "R");
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // dp x tp with a vocab-parallel table: Partial on dp, rows on tp.
  o = EmbeddingBackwardOnMeta({2, 2}, "S(0),R", "S(0),R", "R,S(0)");
  EXPECT_EQ(o.sharding, "P(sum),S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // A replicated table keeps a replicated gradient where the grad is.
  o = EmbeddingBackwardOnMeta({4}, "R", "R", "R");
  EXPECT_EQ(o.sharding, "R");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // The table is layout-only: even where no strategy wants its layout (a
  // Partial table), none of its data moves.
  o = EmbeddingBackwardOnMeta({2}, "R", "R", "P(sum)");
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

TEST(VocabShardingTest, EmbeddingBackwardChecksIndicesAgainstTheTable) {
  LocalCluster cluster(2);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        const std::vector<Placement> rows = {Placement::Shard(0)};
        const std::vector<Placement> replicated = {Placement::Replicate()};
        DT_ASSIGN_OR_RETURN(
            DTensor table,
            DTensor::Distribute(runtime, *Tensor::Zeros({4, 2}, DType::kF32),
                                mesh, rows));
        DT_ASSIGN_OR_RETURN(
            DTensor indices,
            DTensor::Distribute(runtime,
                                *Tensor::FromVector<int64_t>({1, 9}, {2}), mesh,
                                replicated));
        DT_ASSIGN_OR_RETURN(
            DTensor grad,
            DTensor::Distribute(runtime, *Tensor::Ones({2, 2}, DType::kF32),
                                mesh, replicated));
        absl::StatusOr<DTensor> dtable =
            ops::EmbeddingBackward(indices, grad, table);
        if (dtable.ok() ||
            dtable.status().message().find("9") == std::string::npos) {
          return absl::InternalError(absl::StrCat("index 9 of a 4-row table: ",
                                                  dtable.status().ToString()));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(VocabShardingTest, RowShardedLookupIsCompletedByOneAllReduce) {
  // Rows 0..9 on 4 ranks (3, 3, 3, 1): each index found on one rank only.
  LocalCluster cluster(4);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  std::mt19937 rng(3);
  const Tensor table = RandomTensor({10, 3}, DType::kF32, -1, 1, rng);
  const Tensor indices =
      *Tensor::FromVector<int64_t>({9, 0, 3, 3, 8, 2}, {2, 3});
  const Tensor expected = *Embedding(indices, table);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(
            DTensor t,
            DTensor::Distribute(runtime, table, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(DTensor i,
                            DTensor::Distribute(runtime, indices, mesh,
                                                {Placement::Replicate()}));
        CommCounter counter;
        DTensor out;
        {
          CommCounter::Scope scope(counter);
          DT_ASSIGN_OR_RETURN(out, ops::Embedding(i, t));
        }
        if (counter.total_collectives() != 0 ||
            !out.placements()[0].is_partial()) {
          return absl::InternalError(out.spec().ToString());
        }
        DT_ASSIGN_OR_RETURN(DTensor reduced,
                            out.Redistribute({Placement::Replicate()}));
        if (!AllClose(reduced.ToLocal(), expected)) {
          return absl::InternalError(reduced.ToLocal().ToString());
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// ---- Errors. ----

TEST(VocabErrorTest, BadInputsAreErrorsNamingTheOpAndValue) {
  const auto embedding = [](const In& in) {
    return ops::Embedding(in[0], in[1]);
  };
  MetaOutcome o =
      RunOnMeta({2}, {{{4}, "R"}, {{8, 3}, "R"}}, embedding);  // f32 indices
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("embedding"), std::string::npos);
  o = RunOnMeta({2}, {{{4}, "R", DType::kI64}, {{8}, "R"}}, embedding);
  EXPECT_FALSE(o.status.ok());
  const auto loss = [](Reduction r) {
    return [r](const In& in) { return ops::CrossEntropy(in[0], in[1], r); };
  };
  o = RunOnMeta({2}, {{{4, 5}, "R"}, {{3}, "R", DType::kI64}},
                loss(Reduction::kMean));
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("[3]"), std::string::npos) << o.status;
  o = RunOnMeta({2}, {{{4, 5}, "R"}, {{4}, "R", DType::kI64}},
                loss(static_cast<Reduction>(7)));
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("7"), std::string::npos) << o.status;
  o = RunOnMeta({2}, {{{4, 5}, "R"}, {{4}, "R"}}, loss(Reduction::kSum));
  EXPECT_FALSE(o.status.ok());  // float targets
}

TEST(VocabErrorTest, OutOfRangeIndicesAreErrorsOnEveryRankThatHoldsThem) {
  LocalCluster cluster(2);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor table, Tensor::Ones({6, 2}, DType::kF32));
        DT_ASSIGN_OR_RETURN(Tensor indices,
                            Tensor::FromVector<int64_t>({1, 6}, {2}));
        DT_ASSIGN_OR_RETURN(
            DTensor t,
            DTensor::Distribute(runtime, table, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(DTensor i,
                            DTensor::Distribute(runtime, indices, mesh,
                                                {Placement::Replicate()}));
        return ops::Embedding(i, t).status();
      });
  for (const absl::Status& status : statuses) {
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("index 6"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace dtensor
