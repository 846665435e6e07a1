// The propagation engine on ops written for the test: the cost rule (the
// planner's redistribution cost plus the kernel's own collectives), the
// tie-break, the combination of per-mesh-dim strategies, the cache, a kernel
// that communicates, and the errors of a call.
#include "dtensor/ops/propagation.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/registry.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::MetaTensor;

// A strategy of a one-input, one-output test op, in text.
struct TextStrategy {
  std::string input;
  std::string output;
  std::vector<KernelComm> kernel_comms;
};

// A one-input op whose strategies are `strategies`, its output of the
// input's shape and dtype... or of `output_shape` when given; the kernel
// returns its input (or runs `kernel`).
std::unique_ptr<OpDef> TestOp(std::vector<TextStrategy> strategies,
                              std::optional<Shape> output_shape = {},
                              KernelFn kernel = {}) {
  auto op = std::make_unique<OpDef>();
  op->name = "test_op";
  op->infer = [output_shape](
                  absl::Span<const DTensorSpec* const> in,
                  const OpArgs&) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{
        {output_shape.value_or(in[0]->shape()), in[0]->dtype()}};
  };
  op->strategies = [strategies](const StrategyContext& ctx)
      -> absl::StatusOr<std::vector<OpStrategy>> {
    std::vector<OpStrategy> result;
    for (const TextStrategy& s : strategies) {
      OpStrategy strategy;
      DT_ASSIGN_OR_RETURN(Sharding in,
                          Sharding::Parse(s.input, ctx.inputs[0]->ndim()));
      DT_ASSIGN_OR_RETURN(
          Sharding out,
          Sharding::Parse(s.output,
                          static_cast<int64_t>(ctx.outputs[0].shape.size())));
      strategy.inputs = {in};
      strategy.outputs = {out};
      strategy.kernel_comms = s.kernel_comms;
      result.push_back(std::move(strategy));
    }
    return result;
  };
  op->kernel =
      kernel ? kernel
             : KernelFn(
                   [](const KernelContext&,
                      absl::Span<const Tensor> in) -> absl::StatusOr<OpLocals> {
                     return OpLocals{in[0]};
                   });
  return op;
}

// Propagates `op` on one metadata tensor on a mesh of 4.
absl::StatusOr<std::shared_ptr<const Propagation>> PropagateOne(
    const OpDef& op, const Shape& shape, const std::string& sharding,
    DType dtype = DType::kF32) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  DT_ASSIGN_OR_RETURN(DTensor x,
                      MetaTensor(runtime, mesh, shape, sharding, dtype));
  const DTensorSpec* in[] = {&x.spec()};
  return Propagate(op, in, OpArgs(), *runtime);
}

// The alpha-beta cost written out (CostModel's formula with the defaults).
double AllReduceUs(int64_t n, double bytes) {
  return 6.6 + 2 * (n - 1) * 0.6 + 2.0 * (n - 1) / n * bytes / 87.7e3;
}
double AllGatherUs(int64_t n, double bytes) {
  return 6.6 + (n - 1) * 0.6 + (n - 1) * bytes / 87.7e3;
}

TEST(PropagationCostTest, KernelCollectivesCountInTheCost) {
  // Reduce a sharded vector: all-reduce a 4-byte partial in the kernel, or
  // gather the vector first. Large vectors favour the kernel's all-reduce,
  // small ones the gather (fewer hops).
  const std::vector<TextStrategy> strategies = {
      {"S(0)", "R", {{CommKind::kAllReduce, {0}, 4}}},
      {"R", "R", {}},
  };
  const auto op = TestOp(strategies, Shape{});
  absl::StatusOr<std::shared_ptr<const Propagation>> large =
      PropagateOne(*op, {1 << 20}, "S(0)");
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ((*large)->strategy.inputs[0].ToString(), "S(0)");
  EXPECT_NEAR((*large)->cost_us, AllReduceUs(4, 4), 1e-9);
  ASSERT_EQ((*large)->kernel_events.size(), 1u);
  EXPECT_EQ((*large)->kernel_events[0].kind, CommKind::kAllReduce);
  EXPECT_EQ((*large)->num_collectives(), 1);

  absl::StatusOr<std::shared_ptr<const Propagation>> small =
      PropagateOne(*op, {8}, "S(0)");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)->strategy.inputs[0].ToString(), "R");
  EXPECT_NEAR((*small)->cost_us, AllGatherUs(4, 8), 1e-9);
  EXPECT_TRUE((*small)->kernel_events.empty());
  ASSERT_NE((*small)->inputs[0].plan, nullptr);
  EXPECT_EQ((*small)->inputs[0].to->sharding().ToString(), "R");
}

TEST(PropagationCostTest, TiesGoToNoRedistributionThenToTheFirstStrategy) {
  // Slicing R into S(0) is free, but keeping R redistributes nothing.
  const auto keep = TestOp({{"S(0)", "S(0)", {}}, {"R", "R", {}}});
  absl::StatusOr<std::shared_ptr<const Propagation>> p =
      PropagateOne(*keep, {8}, "R");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "R");
  EXPECT_EQ((*p)->num_valid_strategies, 2);
  // Equal in every respect: the first generated wins.
  for (const std::string first : {"R", "S(0)"}) {
    const std::string second = first == "R" ? "S(0)" : "R";
    const auto op = TestOp({{"R", first, {}}, {"R", second, {}}});
    p = PropagateOne(*op, {8}, "R");
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), first);
  }
}

TEST(PropagationCostTest, TiesGoToCompleteOutputs) {
  for (const bool partial_first : {true, false}) {
    const auto op = partial_first
                        ? TestOp({{"R", "P(sum)", {}}, {"R", "R", {}}})
                        : TestOp({{"R", "R", {}}, {"R", "P(sum)", {}}});
    absl::StatusOr<std::shared_ptr<const Propagation>> p =
        PropagateOne(*op, {8}, "R");
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "R");
  }
}

TEST(PropagationCostTest, ACommunicatingStrategyPaysForCompletingItsOutput) {
  // From S(0): an all-to-all to S(1) leaving a Partial output (which one more
  // all-reduce completes), or an all-gather leaving a complete one. The
  // all-to-all alone is cheaper; with the completion it is not.
  const auto op = TestOp({{"S(1)", "P(sum)", {}}, {"R", "R", {}}}, Shape{8, 8});
  absl::StatusOr<std::shared_ptr<const Propagation>> p =
      PropagateOne(*op, {8, 8}, "S(0)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "R");
  EXPECT_NEAR((*p)->cost_us, AllGatherUs(4, 2 * 8 * 4), 1e-9);
  // A strategy that spends nothing defers the completion to whoever reads
  // the output: a free Partial beats a paid complete output.
  const auto free_partial =
      TestOp({{"S(0)", "P(sum)", {}}, {"R", "R", {}}}, Shape{8, 8});
  p = PropagateOne(*free_partial, {8, 8}, "S(0)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "P(sum)");
  EXPECT_EQ((*p)->cost_us, 0);
}

TEST(PropagationCostTest, APartialMadeBySlicingReplicatedInputsPaysToo) {
  // From R: slicing is free and leaves a P(sum) the caller's layouts did not
  // imply, which one all-reduce of the 8x8 output completes; the complete
  // strategy's kernel all-reduces 4 bytes. Charged, the slice loses.
  const auto op = TestOp(
      {{"S(0)", "P(sum)", {}}, {"R", "R", {{CommKind::kAllReduce, {0}, 4}}}},
      Shape{8, 8});
  absl::StatusOr<std::shared_ptr<const Propagation>> p =
      PropagateOne(*op, {8, 8}, "R");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "R");
  EXPECT_NEAR((*p)->cost_us, AllReduceUs(4, 4), 1e-9);
  // A kernel all-reduce larger than the completion: the Partial is cheaper
  // even when read, and its cost_us is what the call spends (nothing).
  const auto large_kernel =
      TestOp({{"S(0)", "P(sum)", {}},
              {"R", "R", {{CommKind::kAllReduce, {0}, 1 << 20}}}},
             Shape{8, 8});
  p = PropagateOne(*large_kernel, {8, 8}, "R");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "P(sum)");
  EXPECT_EQ((*p)->cost_us, 0);
}

TEST(PropagationCostTest, UnreachableAndUnreducibleStrategiesAreDropped) {
  // Shard -> Partial cannot be planned; a Partial(avg) of integers cannot
  // be reduced.
  const auto op =
      TestOp({{"P(sum)", "P(sum)", {}}, {"R", "P(avg)", {}}, {"R", "R", {}}});
  absl::StatusOr<std::shared_ptr<const Propagation>> p =
      PropagateOne(*op, {8}, "S(0)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->num_strategies, 3);
  EXPECT_EQ((*p)->num_valid_strategies, 2);  // P(avg) of f32 is fine
  p = PropagateOne(*op, {8}, "S(0)", DType::kI64);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->num_valid_strategies, 1);
  EXPECT_EQ((*p)->outputs[0]->sharding().ToString(), "R");
  const auto only_bad = TestOp({{"P(sum)", "P(sum)", {}}});
  p = PropagateOne(*only_bad, {8}, "S(0)");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("test_op"), std::string::npos)
      << p.status();
}

TEST(PropagationCostTest, RedistributionCostIsThePlannersCost) {
  const auto op = TestOp({{"S(1)", "S(1)", {}}});
  absl::StatusOr<std::shared_ptr<const Propagation>> p =
      PropagateOne(*op, {64, 32}, "S(0)");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_NE((*p)->inputs[0].plan, nullptr);
  const CostModel model(1);
  absl::StatusOr<RedistributePlan> plan = PlanRedistribution(
      *Sharding::Parse("S(0)", 2), *Sharding::Parse("S(1)", 2), {4}, {64, 32},
      DType::kF32, model);
  ASSERT_TRUE(plan.ok());
  EXPECT_DOUBLE_EQ((*p)->cost_us, plan->total_cost_us);
  // One all-to-all of a 16x32 f32 shard: 3/4 of 2048 bytes received.
  EXPECT_NEAR((*p)->cost_us, 6.6 + 3 * 0.6 + 0.75 * 2048 / 87.7e3, 1e-9);
}

TEST(PropagationCacheTest, HitsOnEqualCallsAndIgnoresKernelScalars) {
  PropagationCache& cache = PropagationCache::Shared();
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  const DTensor x = *MetaTensor(runtime, mesh, {8, 6}, "S(0),R");
  const DTensor same = *MetaTensor(runtime, mesh, {8, 6}, "S(0),R");
  const int64_t before = cache.misses();
  ASSERT_TRUE(ops::Sum(x, {1}).ok());
  EXPECT_EQ(cache.misses(), before + 1);
  ASSERT_TRUE(ops::Sum(x, {1}).ok());
  ASSERT_TRUE(ops::Sum(same, {1}).ok());  // another spec object, equal
  EXPECT_EQ(cache.misses(), before + 1);
  ASSERT_TRUE(ops::Sum(x, {0}).ok());        // other dims
  ASSERT_TRUE(ops::Sum(x, {1}, true).ok());  // keepdim
  EXPECT_EQ(cache.misses(), before + 3);
  ASSERT_TRUE(ops::Mul(x, 2.0).ok());
  ASSERT_TRUE(ops::Mul(x, 3.0).ok());  // a kernel scalar: same key
  EXPECT_EQ(cache.misses(), before + 4);
  const DTensor y = *MetaTensor(runtime, mesh, {8, 6}, "R,S(1)");
  ASSERT_TRUE(ops::Sum(y, {1}).ok());  // another layout
  EXPECT_EQ(cache.misses(), before + 5);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0);
  ASSERT_TRUE(ops::Sum(x, {1}).ok());
  EXPECT_EQ(cache.misses(), before + 6);
}

TEST(PropagationCacheTest, KeepsTheCallersSpecObjectsAsKeys) {
  // Later calls with the same DTensors (or with op outputs, whose specs the
  // cache holds) then compare by address.
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DTensor x = *MetaTensor(runtime, mesh, {8, 6}, "S(0)");
  const OpDef& relu = **OpRegistry::Builtin().Find("relu");
  const DTensorSpec* in[] = {&x.spec()};
  const std::shared_ptr<const DTensorSpec>* owners[] = {&x.spec_ptr()};
  PropagationCache::Shared().Clear();
  absl::StatusOr<std::shared_ptr<const Propagation>> cached =
      PropagationCache::Shared().Get(relu, in, OpArgs(), *runtime, owners);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ((*cached)->inputs[0].from.get(), &x.spec());
  absl::StatusOr<std::shared_ptr<const Propagation>> copied =
      Propagate(relu, in, OpArgs(), *runtime);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_NE((*copied)->inputs[0].from.get(), &x.spec());
  EXPECT_EQ(*(*copied)->inputs[0].from, x.spec());
  // An op's output carries the cached output spec itself.
  absl::StatusOr<DTensor> y = ops::Relu(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->spec_ptr(), (*cached)->outputs[0]);
}

TEST(PropagationCacheTest, LinksSetOnTheRuntimeArePartOfTheKey) {
  // Two kernel all-reduces of equal cost under default links; a slow mesh
  // dim 0 makes the one over mesh dim 1 cheaper.
  const auto op = TestOp({{"R,R", "R,R", {{CommKind::kAllReduce, {0}, 64}}},
                          {"R,R", "R,R", {{CommKind::kAllReduce, {1}, 64}}}});
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  auto plain = Runtime::MetadataOnly(0);
  auto slow = Runtime::MetadataOnly(0);
  ASSERT_TRUE(slow->SetLinks(mesh, {{1.0, 50.0}, {87.7, 0.6}}).ok());
  const DTensor a = *MetaTensor(plain, mesh, {8}, "R,R");
  const DTensor b = *MetaTensor(slow, mesh, {8}, "R,R");
  const DTensor* in_a[] = {&a};
  const DTensor* in_b[] = {&b};
  CommCounter counter;
  {
    CommCounter::Scope scope(counter);
    ASSERT_TRUE(Dispatch(*op, in_a, OpArgs()).ok());
    ASSERT_TRUE(Dispatch(*op, in_b, OpArgs()).ok());
    ASSERT_TRUE(Dispatch(*op, in_a, OpArgs()).ok());
  }
  ASSERT_EQ(counter.events().size(), 3u);
  EXPECT_EQ(counter.events()[0].mesh_dims, std::vector<int64_t>{0});
  EXPECT_EQ(counter.events()[1].mesh_dims, std::vector<int64_t>{1});
  EXPECT_EQ(counter.events()[2].mesh_dims, std::vector<int64_t>{0});
}

// A kernel that communicates itself: each rank sums its shard, then
// all-reduces the partial sums over mesh dim 0 (loss parallel in small).
TEST(PropagationKernelTest, AKernelThatCommunicatesIsRunAndCounted) {
  const auto op = TestOp(
      {{"S(0)", "R", {{CommKind::kAllReduce, {0}, 4}}}}, Shape{},
      [](const KernelContext& ctx,
         absl::Span<const Tensor> in) -> absl::StatusOr<OpLocals> {
        DT_ASSIGN_OR_RETURN(Tensor sum, Sum(in[0]));
        sum = sum.Clone();
        DT_ASSIGN_OR_RETURN(auto comm, ctx.runtime().groups()->ForMeshDims(
                                           ctx.output(0).mesh(), {0}));
        DT_RETURN_IF_ERROR(comm->AllReduce(sum, ReduceOp::kSum));
        return OpLocals{sum};
      });
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  LocalCluster cluster(4);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor full, Tensor::Arange(0, 10, 1, DType::kF32));
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            DTensor::Distribute(runtime, full, mesh, {Placement::Shard(0)}));
        const DTensor* in[] = {&x};
        CommCounter counter;
        absl::StatusOr<DTensor> y;
        {
          CommCounter::Scope scope(counter);
          y = DispatchOne(*op, in, OpArgs());
        }
        DT_RETURN_IF_ERROR(y.status());
        DT_ASSIGN_OR_RETURN(double value, y->ToLocal().Item());
        if (value != 45 || counter.count(CommKind::kAllReduce) != 1 ||
            counter.total_collectives() != 1) {
          return absl::InternalError(absl::StrCat("sum ", value, " after ",
                                                  counter.total_collectives(),
                                                  " collectives"));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(CombineMeshDimsTest, EveryCombinationAndTheInputsNestingOrder) {
  // relu of a [16, 4] tensor on a 2x2 mesh: per mesh dim R, S(0), S(1)
  // (nine combinations) plus, where both mesh dims shard dim 0, the input's
  // order [1, 0] besides the default.
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  const DTensor x = *MetaTensor(runtime, mesh, {16, 4}, "S(0)[1],S(0)[0]");
  const DTensorSpec* in[] = {&x.spec()};
  const std::vector<TensorMeta> out = {{{16, 4}, DType::kF32}};
  const OpArgs args;
  const StrategyContext ctx{in, args, out, mesh, {2, 2}};
  EinsumSpec spec;
  spec.num_loops = 2;
  spec.loops.inputs = {{0, 1}};
  spec.loops.outputs = {{0, 1}};
  absl::StatusOr<std::vector<OpStrategy>> strategies =
      EinsumStrategies(ctx, spec);
  ASSERT_TRUE(strategies.ok()) << strategies.status();
  std::vector<std::string> texts;
  for (const OpStrategy& s : *strategies) texts.push_back(s.ToString());
  EXPECT_EQ(texts.size(), 10u);
  EXPECT_NE(std::find(texts.begin(), texts.end(),
                      "[S(0)[1],S(0)[0]] -> [S(0)[1],S(0)[0]]"),
            texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "[S(0),S(0)] -> [S(0),S(0)]"),
            texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "[S(1),S(0)] -> [S(1),S(0)]"),
            texts.end());
}

TEST(CombineMeshDimsTest, InconsistentCandidatesAreInternalErrors) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DTensor x = *MetaTensor(runtime, mesh, {4}, "R");
  const DTensorSpec* in[] = {&x.spec(), &x.spec()};
  const std::vector<TensorMeta> out = {{{4}, DType::kF32}};
  const OpArgs args;
  const StrategyContext ctx{in, args, out, mesh, {2}};
  // Both inputs iterate loop 0, but only one is sharded on it.
  DimStrategy bad;
  bad.inputs = {Placement::Shard(0), Placement::Replicate()};
  bad.outputs = {Placement::Shard(0)};
  const LoopDims loops{{{0}, {0}}, {{0}}};
  const std::vector<std::vector<DimStrategy>> candidates = {{bad}};
  absl::StatusOr<std::vector<OpStrategy>> s =
      CombineMeshDims(ctx, candidates, loops);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInternal) << s.status();
}

// `layout` (text, on a 2-D mesh) on the 3-D mesh with a size-1 mesh dim
// inserted between the two: Replicate there.
std::string WithUnitDimInMiddle(const std::string& layout) {
  const size_t comma = layout.find(',');
  return absl::StrCat(layout.substr(0, comma), ",R", layout.substr(comma));
}

TEST(CombineMeshDimsTest, ASizeOneMeshDimMultipliesNoStrategy) {
  // mm and mul on dp=2,pp=1,tp=2 make the choice of dp=2,tp=2 (the
  // reference), Replicate on pp, at its cost and from as many strategies:
  // an option that makes an input Shard or Partial on pp never wins.
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh with_unit = *DeviceMesh::Create({2, 1, 2});
  const DeviceMesh without = *DeviceMesh::Create({2, 2});
  struct Case {
    std::string op;
    Shape a, b;
    std::string a_layout, b_layout;
  };
  const std::vector<Case> cases = {
      {"mm", {8, 16}, {16, 4}, "S(0),S(1)", "R,S(0)"},
      {"mm", {8, 16}, {16, 4}, "R,S(1)", "S(1),R"},
      {"mul", {8, 4}, {8, 4}, "S(0),S(1)", "R,S(0)"},
      {"mul", {8, 4}, {8, 4}, "P(sum),R", "R,R"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.op, " ", c.a_layout, " ", c.b_layout));
    const OpDef& op = **OpRegistry::Builtin().Find(c.op);
    std::shared_ptr<const Propagation> p[2];
    for (int unit = 0; unit < 2; ++unit) {
      const DeviceMesh& mesh = unit == 1 ? with_unit : without;
      const auto layout = [unit](const std::string& text) {
        return unit == 1 ? WithUnitDimInMiddle(text) : text;
      };
      const DTensor a = *MetaTensor(runtime, mesh, c.a, layout(c.a_layout));
      const DTensor b = *MetaTensor(runtime, mesh, c.b, layout(c.b_layout));
      const DTensorSpec* in[] = {&a.spec(), &b.spec()};
      absl::StatusOr<std::shared_ptr<const Propagation>> result =
          Propagate(op, in, OpArgs(), *runtime);
      ASSERT_TRUE(result.ok()) << result.status();
      p[unit] = *result;
    }
    EXPECT_EQ(p[1]->num_strategies, p[0]->num_strategies);
    EXPECT_EQ(p[1]->num_valid_strategies, p[0]->num_valid_strategies);
    EXPECT_NEAR(p[1]->cost_us, p[0]->cost_us, 1e-9);
    ASSERT_EQ(p[1]->strategy.inputs.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(p[1]->strategy.inputs[i].ToString(),
                WithUnitDimInMiddle(p[0]->strategy.inputs[i].ToString()));
    }
    EXPECT_EQ(p[1]->outputs[0]->sharding().ToString(),
              WithUnitDimInMiddle(p[0]->outputs[0]->sharding().ToString()));
    EXPECT_EQ(p[1]->num_collectives(), p[0]->num_collectives());
  }
}

TEST(DispatchErrorTest, CallsThatDoNotFitTheOpAreErrorsNamingIt) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DTensor x = *MetaTensor(runtime, mesh, {4, 4}, "R");
  const OpDef& mm = **OpRegistry::Builtin().Find("mm");
  const DTensor* one[] = {&x};
  absl::StatusOr<OpOutputs> out = Dispatch(mm, one, OpArgs());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("mm takes 2"), std::string::npos)
      << out.status();
  const DTensor* with_null[] = {&x, nullptr};
  out = Dispatch(mm, with_null, OpArgs());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input 1 is required"),
            std::string::npos)
      << out.status();
  const OpDef& sum = **OpRegistry::Builtin().Find("sum");
  out = Dispatch(sum, one, OpArgs());  // no arguments
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("sum takes 2 argument"),
            std::string::npos)
      << out.status();
  OpArgs wrong_kind;
  wrong_kind.AddInt(0).AddBool(false);
  out = Dispatch(sum, one, wrong_kind);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("dims"), std::string::npos)
      << out.status();
  EXPECT_FALSE(DispatchOne(sum, {}, OpArgs()).ok());
  EXPECT_FALSE(
      DispatchOne(**OpRegistry::Builtin().Find("aminmax"), one, OpArgs()).ok());
}

TEST(PropagationTest, ToStringDescribesTheChoice) {
  const auto op = TestOp({{"S(1)", "S(1)", {}}});
  absl::StatusOr<std::shared_ptr<const Propagation>> p =
      PropagateOne(*op, {8, 8}, "S(0)");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string text = (*p)->ToString();
  EXPECT_NE(text.find("test_op: [S(1)] -> [S(1)]"), std::string::npos) << text;
  EXPECT_NE(text.find("all_to_all"), std::string::npos) << text;
}

}  // namespace
}  // namespace dtensor
