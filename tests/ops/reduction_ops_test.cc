// Reductions on DTensors: randomized property tests against the tensor layer
// on gathered inputs (any dims, keepdim, even and uneven shards, Partial
// inputs), the Partial outputs of sharded reduced dims without
// communication, and the unbiased mean over uneven shards.
#include "dtensor/ops/reduction_ops.h"

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/registry.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckCases;
using testing_util::MetaTensor;
using testing_util::OpCase;
using testing_util::PartialOpsFor;
using testing_util::RandomMeshShape;
using testing_util::RandomShape;
using testing_util::RandomSharding;
using testing_util::RandomTensor;

struct Spec {
  std::string op;
  std::vector<DType> dtypes;
  // The reference on the full tensor: one tensor per output.
  std::function<absl::StatusOr<std::vector<Tensor>>(
      const Tensor&, absl::Span<const int64_t>, bool)>
      reference;
};

void PrintTo(const Spec& spec, std::ostream* os) { *os << spec.op; }

using Reduce = absl::StatusOr<Tensor> (*)(const Tensor&,
                                          absl::Span<const int64_t>, bool);

Spec OneOutput(std::string op, Reduce f, std::vector<DType> dtypes) {
  return {std::move(op), std::move(dtypes),
          [f](const Tensor& x, absl::Span<const int64_t> dims,
              bool keepdim) -> absl::StatusOr<std::vector<Tensor>> {
            absl::StatusOr<Tensor> out = f(x, dims, keepdim);
            if (!out.ok()) return out.status();
            return std::vector<Tensor>{*std::move(out)};
          }};
}

std::vector<Spec> AllSpecs() {
  const std::vector<DType> any = {DType::kF32, DType::kF64, DType::kI64,
                                  DType::kBool};
  const std::vector<DType> numbers = {DType::kF32, DType::kF64, DType::kI32};
  std::vector<Spec> specs = {
      OneOutput("sum", Sum, any),
      OneOutput("mean", Mean, {DType::kF32, DType::kF64}),
      OneOutput("amax", Max, numbers),
      OneOutput("amin", Min, numbers),
      OneOutput("max", Max, {DType::kF32, DType::kBool}),
      OneOutput("min", Min, {DType::kF32, DType::kBool}),
      // Reference: the unfused square and sum on the gathered tensor.
      OneOutput("sum_squares",
                +[](const Tensor& x, absl::Span<const int64_t> dims,
                    bool keepdim) -> absl::StatusOr<Tensor> {
                  DT_ASSIGN_OR_RETURN(Tensor wide, x.To(DType::kF64));
                  DT_ASSIGN_OR_RETURN(Tensor squares, Mul(wide, wide));
                  return Sum(squares, dims, keepdim);
                },
                {DType::kF32, DType::kF64}),
  };
  specs.push_back({"aminmax",
                   {DType::kF32, DType::kI64},
                   [](const Tensor& x, absl::Span<const int64_t> dims,
                      bool keepdim) -> absl::StatusOr<std::vector<Tensor>> {
                     DT_ASSIGN_OR_RETURN(Tensor min, Min(x, dims, keepdim));
                     DT_ASSIGN_OR_RETURN(Tensor max, Max(x, dims, keepdim));
                     return std::vector<Tensor>{min, max};
                   }});
  return specs;
}

// A random subset of the dims of a rank-`rank` tensor, some negative; empty
// (all dims) now and then.
std::vector<int64_t> RandomDims(int64_t rank, std::mt19937& rng) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (rng() % 2 == 0) dims.push_back(rng() % 2 == 0 ? d : d - rank);
  }
  std::shuffle(dims.begin(), dims.end(), rng);
  return dims;
}

class ReductionPropertyTest : public ::testing::TestWithParam<Spec> {};

TEST_P(ReductionPropertyTest, MatchesTheTensorLayerOnGatheredInputs) {
  const Spec& spec = GetParam();
  absl::StatusOr<const OpDef*> op = OpRegistry::Builtin().Find(spec.op);
  ASSERT_TRUE(op.ok()) << op.status();
  const bool extreme =
      spec.op != "sum" && spec.op != "mean" && spec.op != "sum_squares";
  std::mt19937 rng(std::hash<std::string>()(spec.op) % 100000);
  for (int round = 0; round < 4; ++round) {
    const std::vector<int64_t> mesh_shape = RandomMeshShape(rng);
    // One (dims, keepdim) per round, so that the call knows them.
    const int64_t rank = rng() % 4;
    const std::vector<int64_t> dims = RandomDims(rank, rng);
    const bool keepdim = rng() % 2 == 0;
    std::vector<OpCase> cases;
    for (int k = 0; k < 10; ++k) {
      Shape shape = RandomShape(rank, 6, rng);
      if (extreme) {
        // max and min of nothing are errors: reduced sizes at least 1.
        for (int64_t& size : shape) size = std::max<int64_t>(size, 1);
      }
      const DType dtype = spec.dtypes[rng() % spec.dtypes.size()];
      OpCase c;
      c.inputs = {RandomTensor(shape, dtype, -4, 4, rng)};
      c.shardings = {RandomSharding(static_cast<int64_t>(mesh_shape.size()),
                                    rank, PartialOpsFor(dtype), rng)};
      c.description = absl::StrCat(spec.op, " dims [", absl::StrJoin(dims, ","),
                                   "] keepdim ", keepdim);
      cases.push_back(std::move(c));
    }
    OpArgs args;
    args.AddInts(dims).AddBool(keepdim);
    const absl::Status status = CheckCases(
        mesh_shape, cases,
        [&](const std::vector<DTensor>& in)
            -> absl::StatusOr<std::vector<DTensor>> {
          const DTensor* x[] = {&in[0]};
          DT_ASSIGN_OR_RETURN(OpOutputs out, Dispatch(**op, x, args));
          return std::vector<DTensor>(out.begin(), out.end());
        },
        [&](const std::vector<Tensor>& in) {
          return spec.reference(in[0], dims, keepdim);
        },
        1e-4, 1e-4);
    ASSERT_TRUE(status.ok()) << status;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, ReductionPropertyTest,
                         ::testing::ValuesIn(AllSpecs()),
                         [](const ::testing::TestParamInfo<Spec>& info) {
                           return info.param.op;
                         });

TEST(ReductionCoverageTest, EveryRegisteredReductionIsTested) {
  std::set<std::string> tested;
  for (const Spec& spec : AllSpecs()) tested.insert(spec.op);
  for (const OpDef* op : ops::ReductionOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- Layouts (1-D mesh of 4 unless said). ----

struct Outcome {
  std::vector<std::string> shardings;
  int64_t collectives = 0;
};

Outcome RunMeta(const Shape& shape, const std::string& sharding,
                const std::string& op, std::vector<int64_t> dims,
                bool keepdim = false,
                const std::vector<int64_t>& mesh_shape = {4}) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create(mesh_shape);
  const DTensor x = *MetaTensor(runtime, mesh, shape, sharding);
  OpArgs args;
  args.AddInts(dims).AddBool(keepdim);
  const DTensor* in[] = {&x};
  CommCounter counter;
  absl::StatusOr<OpOutputs> out;
  {
    CommCounter::Scope scope(counter);
    out = Dispatch(**OpRegistry::Builtin().Find(op), in, args);
  }
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  Outcome outcome{{}, counter.total_collectives()};
  for (const DTensor& t : *out)
    outcome.shardings.push_back(t.sharding().ToString());
  return outcome;
}

TEST(ReductionShardingTest, ShardedReducedDimGivesPartialWithoutCommunication) {
  for (const auto& [op, sharding] :
       std::vector<std::pair<std::string, std::string>>{{"sum", "P(sum)"},
                                                        {"mean", "P(sum)"},
                                                        {"amax", "P(max)"},
                                                        {"max", "P(max)"},
                                                        {"amin", "P(min)"},
                                                        {"min", "P(min)"}}) {
    const Outcome o = RunMeta({8, 6}, "S(0)", op, {0});
    ASSERT_EQ(o.shardings.size(), 1u);
    EXPECT_EQ(o.shardings[0], sharding) << op;
    EXPECT_EQ(o.collectives, 0) << op;
  }
  const Outcome both = RunMeta({8, 6}, "S(1)", "aminmax", {1});
  EXPECT_EQ(both.shardings, (std::vector<std::string>{"P(min)", "P(max)"}));
  EXPECT_EQ(both.collectives, 0);
}

TEST(ReductionShardingTest, KeptDimsKeepTheirShards) {
  // Dim 1 becomes dim 0 when dim 0 is reduced away.
  EXPECT_EQ(RunMeta({8, 6}, "S(1)", "sum", {0}).shardings[0], "S(0)");
  EXPECT_EQ(RunMeta({8, 6}, "S(1)", "sum", {0}, true).shardings[0], "S(1)");
  EXPECT_EQ(
      RunMeta({8, 6, 4}, "S(2),S(0)", "mean", {1}, false, {2, 2}).shardings[0],
      "S(1),S(0)");
}

TEST(ReductionShardingTest, SumsOfPartialsStayPartial) {
  EXPECT_EQ(RunMeta({8, 6}, "P", "sum", {1}).shardings[0], "P(sum)");
  EXPECT_EQ(RunMeta({8, 6}, "P(avg)", "mean", {}).shardings[0], "P(avg)");
  EXPECT_EQ(RunMeta({8, 6}, "P(max)", "amax", {0}).shardings[0], "P(max)");
  // A max of partial sums needs the sums first.
  const Outcome o = RunMeta({8, 6}, "P", "amax", {1});
  EXPECT_EQ(o.shardings[0].find("P"), std::string::npos);
  EXPECT_GE(o.collectives, 1);
}

// PyTorch completes the sums with one all-reduce and returns a complete max;
// reduce-scattering them (cheaper alone) would leave a P(max) that costs a
// second collective to read, which the engine counts (docs/ops.md).
TEST(ReductionShardingTest, AMaxOfPartialSumsEndsCompleteAfterOneCollective) {
  for (const char* op : {"amax", "amin", "max", "min"}) {
    const Outcome o = RunMeta({8, 16}, "P", op, {});
    ASSERT_EQ(o.shardings.size(), 1u) << op;
    EXPECT_EQ(o.shardings[0], "R") << op;
    EXPECT_EQ(o.collectives, 1) << op;
  }
}

// A reduction of a replicated input stays Replicate without communication:
// slicing the input would be free too, but its Partial output would cost a
// collective to read that nothing in the caller's layouts called for.
TEST(ReductionShardingTest, ReductionsOfReplicatedInputsStayReplicate) {
  for (const auto& [mesh, sharding] :
       std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{4}, "R"}, {{2, 2}, "R,R"}, {{2, 3}, "R,R"}}) {
    for (const std::string op : {"sum", "mean", "amax"}) {
      for (const std::vector<int64_t>& dims :
           std::vector<std::vector<int64_t>>{{}, {0}, {1}}) {
        const Outcome o = RunMeta({64, 48}, sharding, op, dims, false, mesh);
        ASSERT_EQ(o.shardings.size(), 1u) << op;
        EXPECT_EQ(o.shardings[0], sharding)
            << op << " over [" << absl::StrJoin(dims, ",") << "] on "
            << sharding;
        EXPECT_EQ(o.collectives, 0) << op << " on " << sharding;
      }
    }
  }
}

// Mean over an unevenly sharded dim, on real ranks: 5 rows over 4 ranks
// (2, 2, 1, 0 rows) must give the exact mean, not an average of local means.
TEST(ReductionMeanTest, MeanOverAnUnevenShardedDimIsUnbiased) {
  const std::vector<double> values = {1, 2, 3, 4, 100};
  double expected = 0;
  for (double v : values) expected += v / values.size();
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  LocalCluster cluster(4);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor full,
                            Tensor::FromVector<double>(values, {5}));
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            DTensor::Distribute(runtime, full, mesh, {Placement::Shard(0)}));
        CommCounter counter;
        absl::StatusOr<DTensor> mean;
        {
          CommCounter::Scope scope(counter);
          mean = ops::Mean(x);
        }
        DT_RETURN_IF_ERROR(mean.status());
        if (mean->sharding().ToString() != "P(sum)" ||
            counter.total_collectives() != 0) {
          return absl::InternalError(
              absl::StrCat("mean is ", mean->sharding().ToString(), " after ",
                           counter.total_collectives(), " collectives"));
        }
        DT_ASSIGN_OR_RETURN(Tensor result, mean->FullTensor());
        DT_ASSIGN_OR_RETURN(double value, result.Item());
        if (!(std::abs(value - expected) <= 1e-12)) {
          return absl::InternalError(
              absl::StrCat("mean ", value, ", expected ", expected));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// A max over a dim with fewer rows than ranks: the ranks without rows add
// the identity, not an error.
TEST(ReductionMaxTest, EmptyShardsOfTheReducedDimContributeTheIdentity) {
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  LocalCluster cluster(4);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor full, Tensor::FromVector<int32_t>(
                                             {-7, -3, -9, -8, -2, -6}, {2, 3}));
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            DTensor::Distribute(runtime, full, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(DTensor max, ops::Amax(x, {0}));
        DT_ASSIGN_OR_RETURN(Tensor result, max.FullTensor());
        if (result.ToVector<int32_t>().value() !=
            std::vector<int32_t>{-7, -2, -6}) {
          return absl::InternalError(
              absl::StrCat("max is ", result.ToString()));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ReductionErrorTest, BadCallsAreErrorsNamingTheOp) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DTensor x = *MetaTensor(runtime, mesh, {4, 3}, "S(0)");
  absl::StatusOr<DTensor> out = ops::Sum(x, {2});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("sum"), std::string::npos)
      << out.status();
  EXPECT_FALSE(ops::Sum(x, {0, -2}).ok());  // repeated dim
  const DTensor i = *MetaTensor(runtime, mesh, {4, 3}, "R", DType::kI64);
  EXPECT_FALSE(ops::Mean(i).ok());
  const DTensor empty = *MetaTensor(runtime, mesh, {0, 3}, "S(1)");
  out = ops::Amax(empty, {0});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("empty"), std::string::npos)
      << out.status();
  EXPECT_TRUE(ops::Sum(empty, {0}).ok());
}

}  // namespace
}  // namespace dtensor
