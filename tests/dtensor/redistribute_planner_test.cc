#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"
#include "tests/dtensor/redistribution_reference.h"

namespace dtensor {
namespace {

using reference::ModelSharding;
using reference::ParseShardingOrFail;
using reference::Problem;

// Every expected cost below is the contract's formula written out by hand:
// launch 6.6 us, 0.6 us a hop, 87.7 GB/s (bytes / 87.7e3 = microseconds).
constexpr double kLaunch = 6.6;
constexpr double kHop = 0.6;
constexpr double kBytesPerUs = 87.7e3;

Problem MakeProblem(const std::vector<int64_t>& mesh_shape,
                    const std::vector<int64_t>& global_shape,
                    int64_t element_bytes = 4) {
  Problem problem;
  problem.network = reference::Network::Default(mesh_shape);
  problem.global_shape = global_shape;
  problem.element_bytes = element_bytes;
  return problem;
}

// The partial ops `sharding` uses: the ones a local Replicate -> Partial may
// introduce on the way to it.
std::vector<int> PartialOps(const ModelSharding& sharding) {
  std::set<int> ops = {0};  // Sum, always offered.
  for (int op : sharding.partial_op) {
    if (op != reference::kNotPartial) ops.insert(op);
  }
  return {ops.begin(), ops.end()};
}

// Plans `from` -> `to` for f32 with the default cost model and checks the
// plan step by step against the reference (chain, kinds, bytes, costs).
RedistributePlan CheckedPlan(const std::string& from, const std::string& to,
                             const std::vector<int64_t>& mesh_shape,
                             const std::vector<int64_t>& global_shape) {
  const int64_t rank = static_cast<int64_t>(global_shape.size());
  absl::StatusOr<RedistributePlan> plan = PlanRedistribution(
      ParseShardingOrFail(from, rank), ParseShardingOrFail(to, rank),
      mesh_shape, global_shape, DType::kF32,
      CostModel(static_cast<int64_t>(mesh_shape.size())));
  if (!plan.ok()) {
    ADD_FAILURE() << from << " -> " << to << ": " << plan.status();
    return {};
  }
  Problem problem = MakeProblem(mesh_shape, global_shape);
  const ModelSharding target =
      reference::ParseModelSharding(to, static_cast<int>(rank));
  problem.local_partial_ops = PartialOps(target);
  const std::string error = reference::CheckPlan(
      *plan, reference::ParseModelSharding(from, static_cast<int>(rank)),
      target, problem);
  EXPECT_EQ(error, "") << from << " -> " << to << "\n" << plan->ToString();
  return *plan;
}

// The route XLA falls back to: all-reduce the Partial mesh dims (one
// collective per op) and all-gather every sharded tensor dim (one collective
// over all its mesh dims), in the cheapest order, then slice locally for
// free. Priced with the reference's formula.
double GatherThenSliceCostUs(const ModelSharding& from,
                             const Problem& problem) {
  // -1 - op: the all-reduce of the mesh dims Partial with op; d >= 0: the
  // all-gather of tensor dim d.
  std::vector<int> collectives;
  for (int op : PartialOps(from)) collectives.push_back(-1 - op);
  for (size_t d = 0; d < from.splits.size(); ++d) {
    if (!from.splits[d].empty()) collectives.push_back(static_cast<int>(d));
  }
  std::sort(collectives.begin(), collectives.end());
  double best = std::numeric_limits<double>::infinity();
  do {
    ModelSharding sharding = from;
    double cost = 0;
    for (int c : collectives) {
      const double bytes = reference::PaddedBytes(sharding, problem);
      if (c >= 0) {
        cost += reference::StepCostUs(CommKind::kAllGather, sharding.splits[c],
                                      bytes, problem.network);
        sharding.splits[c].clear();
        continue;
      }
      std::vector<int> group;
      for (size_t m = 0; m < sharding.partial_op.size(); ++m) {
        if (sharding.partial_op[m] == -1 - c) {
          group.push_back(static_cast<int>(m));
          sharding.partial_op[m] = reference::kNotPartial;
        }
      }
      cost += reference::StepCostUs(CommKind::kAllReduce, group, bytes,
                                    problem.network);
    }
    best = std::min(best, cost);
  } while (std::next_permutation(collectives.begin(), collectives.end()));
  return best;
}

double GatherThenSliceCostUs(const std::string& from,
                             const std::vector<int64_t>& mesh_shape,
                             const std::vector<int64_t>& global_shape) {
  return GatherThenSliceCostUs(reference::ParseModelSharding(
                                   from, static_cast<int>(global_shape.size())),
                               MakeProblem(mesh_shape, global_shape));
}

// The step-by-step check the tests rely on catches broken plans.
TEST(ReferenceCheckTest, RejectsTamperedPlans) {
  const std::vector<int64_t> mesh = {2, 2}, shape = {64, 64};
  const RedistributePlan plan =
      CheckedPlan("S(0),P(sum)", "R,S(1)", mesh, shape);
  ASSERT_EQ(plan.steps.size(), 2u) << plan.ToString();
  const Problem problem = MakeProblem(mesh, shape);
  const ModelSharding from = reference::ParseModelSharding("S(0),P(sum)", 2);
  const ModelSharding to = reference::ParseModelSharding("R,S(1)", 2);
  auto check_edited = [&](const std::function<void(RedistributePlan&)>& edit) {
    RedistributePlan copy = plan;
    edit(copy);
    return reference::CheckPlan(copy, from, to, problem);
  };
  EXPECT_EQ(check_edited([](RedistributePlan&) {}), "");
  EXPECT_NE(
      check_edited([](RedistributePlan& p) { p.steps[0].cost_us *= 1.01; }),
      "");
  EXPECT_NE(check_edited([](RedistributePlan& p) { p.total_cost_us += 0.01; }),
            "");
  EXPECT_NE(
      check_edited([](RedistributePlan& p) { p.steps[1].bytes_per_rank += 1; }),
      "");
  EXPECT_NE(check_edited([](RedistributePlan& p) { p.steps.pop_back(); }), "");
  EXPECT_NE(
      check_edited([](RedistributePlan& p) { p.steps.erase(p.steps.begin()); }),
      "");
  EXPECT_NE(check_edited([](RedistributePlan& p) {
              p.steps[0].kind = CommKind::kAllReduce;
            }),
            "");
  EXPECT_NE(check_edited([](RedistributePlan& p) {
              p.steps[0].mesh_dims = {0, 1};
            }),
            "");
  EXPECT_NE(
      check_edited([](RedistributePlan& p) { p.steps[0].tensor_dims = {}; }),
      "");
  // A "permute" from S(0) to R would create blocks no rank holds.
  RedistributePlan fake;
  fake.steps.push_back({CommKind::kPermute,
                        {0, 1},
                        {},
                        ParseShardingOrFail("S(0),R", 1),
                        ParseShardingOrFail("R,R", 1),
                        32,
                        kLaunch + kHop + 32 / kBytesPerUs});
  fake.total_cost_us = fake.steps[0].cost_us;
  EXPECT_NE(
      reference::CheckPlan(fake, reference::ParseModelSharding("S(0),R", 1),
                           reference::ParseModelSharding("R,R", 1),
                           MakeProblem({2, 2}, {16})),
      "");
}

// ---- One collective where one serves. ----

TEST(PlannerTest, SwappingShardedDimsOnTwoByTwoIsOnePermute) {
  const std::vector<int64_t> mesh = {2, 2}, shape = {1024, 2048};
  const RedistributePlan plan =
      CheckedPlan("S(0),S(1)", "S(1),S(0)", mesh, shape);
  ASSERT_EQ(plan.steps.size(), 1u) << plan.ToString();
  EXPECT_EQ(plan.steps[0].kind, CommKind::kPermute);
  const double block = 512.0 * 1024 * 4;
  EXPECT_DOUBLE_EQ(plan.steps[0].bytes_per_rank, block);
  EXPECT_NEAR(plan.total_cost_us, kLaunch + kHop + block / kBytesPerUs, 1e-9);
  EXPECT_LT(plan.total_cost_us,
            GatherThenSliceCostUs("S(0),S(1)", mesh, shape));
}

TEST(PlannerTest, SwappingTheNestingOrderIsOnePermute) {
  struct Case {
    std::string from, to;
    std::vector<int64_t> mesh, shape;
  };
  const Case cases[] = {
      {"S(0),S(0)", "S(0)[1],S(0)[0]", {2, 2}, {1 << 22}},
      {"S(0),S(0)", "S(0)[1],S(0)[0]", {4, 2}, {4096, 8}},
      {"S(1),S(1),R", "S(1)[1],S(1)[0],R", {2, 2, 2}, {8, 4096}},
      {"S(0),S(0),S(0)", "S(0)[2],S(0)[0],S(0)[1]", {2, 2, 2}, {1 << 20}},
      // Uneven, but both orders cut 6 on (2,2) into the same blocks 2,1,2,1.
      {"S(0),S(0)", "S(0)[1],S(0)[0]", {2, 2}, {6}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.from + " -> " + c.to);
    const RedistributePlan plan = CheckedPlan(c.from, c.to, c.mesh, c.shape);
    ASSERT_EQ(plan.steps.size(), 1u) << plan.ToString();
    EXPECT_EQ(plan.steps[0].kind, CommKind::kPermute);
    const Problem problem = MakeProblem(c.mesh, c.shape);
    const double block = reference::PaddedBytes(
        reference::ParseModelSharding(c.from, static_cast<int>(c.shape.size())),
        problem);
    EXPECT_NEAR(plan.total_cost_us, kLaunch + kHop + block / kBytesPerUs, 1e-9);
    EXPECT_LT(plan.total_cost_us,
              GatherThenSliceCostUs(c.from, c.mesh, c.shape));
  }
}

// 18 on (4,2): default order cuts 5,5,5,3 then 3,2 / 2,1; the swapped order
// cuts 9,9 then 3,3,3,0: other blocks, so no single permute can do it.
TEST(PlannerTest, NoPermuteBetweenDifferentUnevenBlocks) {
  const RedistributePlan plan =
      CheckedPlan("S(0),S(0)", "S(0)[1],S(0)[0]", {4, 2}, {18});
  ASSERT_FALSE(plan.steps.empty());
  EXPECT_FALSE(plan.steps.size() == 1 &&
               plan.steps[0].kind == CommKind::kPermute)
      << plan.ToString();
}

TEST(PlannerTest, MergesOnTwoByTwoByTwoBeatGatherThenSlice) {
  const std::vector<int64_t> mesh = {2, 2, 2};
  const std::pair<std::string, std::string> pairs[] = {
      {"S(1),S(0),R", "R,R,S(2)"},       {"S(1),S(0),R", "S(2),S(2),R"},
      {"S(1),S(0),R", "S(2),S(2),S(2)"}, {"S(0),S(1),S(2)", "S(2),S(2),S(2)"},
      {"S(0),S(0),R", "R,S(1),S(1)"},    {"S(0),S(0),S(1)", "S(2),R,S(2)"},
  };
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{256, 256, 256}, std::vector<int64_t>{8, 8, 8}}) {
    for (const auto& [from, to] : pairs) {
      SCOPED_TRACE(from + " -> " + to + " shape " + absl::StrJoin(shape, "x"));
      const RedistributePlan plan = CheckedPlan(from, to, mesh, shape);
      const double gather_then_slice = GatherThenSliceCostUs(from, mesh, shape);
      // Tiny tensors: latency decides, and gathering may be as good as any.
      if (shape[0] > 8) {
        EXPECT_LT(plan.total_cost_us, gather_then_slice) << plan.ToString();
      } else {
        EXPECT_LE(plan.total_cost_us, gather_then_slice) << plan.ToString();
      }
    }
  }
}

TEST(PlannerTest, PartialToShardIsOneReduceScatter) {
  struct Case {
    std::string from, to;
    std::vector<int64_t> mesh;
    std::vector<int64_t> mesh_dims;  // Of the reduce-scatter, in order.
    int64_t tensor_dim;
  };
  const Case cases[] = {
      {"P(sum)", "S(1)", {4}, {0}, 1},
      {"P(max)", "S(0)", {4}, {0}, 0},
      {"P(sum),P(sum)", "S(0),S(0)", {2, 2}, {0, 1}, 0},
      {"P(sum),P(sum)", "S(1)[1],S(1)[0]", {2, 2}, {1, 0}, 1},
      {"P(avg),P(avg),P(avg)", "S(1),S(1),S(1)", {2, 2, 2}, {0, 1, 2}, 1},
      {"S(0),P(sum)", "S(0),S(0)", {2, 4}, {1}, 0},
  };
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{64, 64}, std::vector<int64_t>{4096, 2048}}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.from + " -> " + c.to + " shape " +
                   absl::StrJoin(shape, "x"));
      const RedistributePlan plan = CheckedPlan(c.from, c.to, c.mesh, shape);
      ASSERT_EQ(plan.steps.size(), 1u) << plan.ToString();
      const RedistributeStep& step = plan.steps[0];
      EXPECT_EQ(step.kind, CommKind::kReduceScatter);
      EXPECT_EQ(step.mesh_dims, c.mesh_dims);
      EXPECT_EQ(step.tensor_dims, std::vector<int64_t>{c.tensor_dim});
      int64_t n = 1;
      for (int64_t m : c.mesh_dims) n *= c.mesh[m];
      const double local = reference::PaddedBytes(
          reference::ParseModelSharding(c.from, 2), MakeProblem(c.mesh, shape));
      EXPECT_NEAR(
          plan.total_cost_us,
          kLaunch + (n - 1) * kHop + (n - 1.0) / n * local / kBytesPerUs, 1e-9);
    }
  }
}

TEST(PlannerTest, GatheringNestedShardsIsOneAllGather) {
  struct Case {
    std::string from, to;
    std::vector<int64_t> mesh, mesh_dims;
  };
  const Case cases[] = {
      {"S(0),S(0)", "R,R", {2, 2}, {0, 1}},
      {"S(0)[1],S(0)[0]", "R,R", {2, 2}, {1, 0}},
      {"S(1),S(1),S(1)", "R,R,R", {2, 2, 2}, {0, 1, 2}},
      {"S(0),S(0)", "R,R", {2, 3}, {0, 1}},
  };
  const std::vector<int64_t> shape = {1536, 1536};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.from + " -> " + c.to);
    const RedistributePlan plan = CheckedPlan(c.from, c.to, c.mesh, shape);
    ASSERT_EQ(plan.steps.size(), 1u) << plan.ToString();
    EXPECT_EQ(plan.steps[0].kind, CommKind::kAllGather);
    EXPECT_EQ(plan.steps[0].mesh_dims, c.mesh_dims);
    int64_t n = 1;
    for (int64_t m : c.mesh_dims) n *= c.mesh[m];
    const double local = 1536.0 * 1536 * 4 / n;
    EXPECT_NEAR(plan.total_cost_us,
                kLaunch + (n - 1) * kHop + (n - 1) * local / kBytesPerUs, 1e-9);
  }
}

TEST(PlannerTest, ReducingSeveralPartialMeshDimsIsOneAllReduce) {
  struct Case {
    std::string from, to;
    std::vector<int64_t> mesh, mesh_dims;
  };
  const Case cases[] = {
      {"P(sum),P(sum)", "R,R", {2, 2}, {0, 1}},
      {"P(sum),P(sum),P(sum)", "R,R,R", {2, 2, 2}, {0, 1, 2}},
      {"P(max),R,P(max)", "R,R,R", {2, 2, 2}, {0, 2}},
      {"P(sum),P(sum)", "R,R", {2, 3}, {0, 1}},
  };
  // Small enough that one all-reduce beats slicing the Replicate mesh dim
  // first and gathering it back after a cheaper all-reduce.
  const std::vector<int64_t> shape = {100, 100};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.from + " -> " + c.to);
    const RedistributePlan plan = CheckedPlan(c.from, c.to, c.mesh, shape);
    ASSERT_EQ(plan.steps.size(), 1u) << plan.ToString();
    EXPECT_EQ(plan.steps[0].kind, CommKind::kAllReduce);
    std::vector<int64_t> dims = plan.steps[0].mesh_dims;
    std::sort(dims.begin(), dims.end());
    EXPECT_EQ(dims, c.mesh_dims);
    int64_t n = 1;
    for (int64_t m : c.mesh_dims) n *= c.mesh[m];
    EXPECT_NEAR(
        plan.total_cost_us,
        kLaunch + 2 * (n - 1) * kHop + 2.0 * (n - 1) / n * 4e4 / kBytesPerUs,
        1e-9);
  }
}

// Mixed ops cannot share one all-reduce.
TEST(PlannerTest, PartialsWithDifferentOpsReduceSeparately) {
  const RedistributePlan plan =
      CheckedPlan("P(sum),P(max)", "R,R", {2, 2}, {100});
  ASSERT_EQ(plan.steps.size(), 2u) << plan.ToString();
  for (const RedistributeStep& step : plan.steps) {
    EXPECT_EQ(step.mesh_dims.size(), 1u);
  }
}

// ---- Steps that move nothing. ----

TEST(PlannerTest, SameShardingIsTheEmptyPlan) {
  const RedistributePlan plan =
      CheckedPlan("S(0)[0],S(0)[1],P(max)", "S(0),S(0),P(max)", {2, 2, 2}, {8});
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_EQ(plan.total_cost_us, 0);
}

TEST(PlannerTest, SlicingAndReplicateToPartialAreFree) {
  const RedistributePlan plan =
      CheckedPlan("R,R,R", "S(1),P(avg),S(0)", {2, 2, 2}, {64, 64});
  EXPECT_EQ(plan.total_cost_us, 0);
  EXPECT_EQ(plan.num_collectives(), 0);
}

TEST(PlannerTest, StepsOverOneRankAreLocal) {
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{
           {"S(0),R", "R,R"},
           {"P(sum),R", "R,R"},
           {"S(0),S(1)", "S(1)[1],S(1)[0]"},
           {"P(sum),S(0)", "S(1),S(0)"}}) {
    SCOPED_TRACE(from + " -> " + to);
    const RedistributePlan plan = CheckedPlan(from, to, {1, 4}, {64, 64});
    EXPECT_EQ(plan.total_cost_us, 0) << plan.ToString();
    EXPECT_EQ(plan.num_collectives(), 0);
  }
}

// An all-gather then a slice costs exactly what one permute costs on two
// ranks; the plan with fewer steps wins.
TEST(PlannerTest, TiesGoToFewerSteps) {
  const RedistributePlan plan = CheckedPlan("S(0),R", "R,S(0)", {2, 2}, {64});
  ASSERT_EQ(plan.steps.size(), 1u) << plan.ToString();
  EXPECT_EQ(plan.steps[0].kind, CommKind::kPermute);
}

// ---- Uneven and empty shapes. ----

TEST(PlannerTest, UnevenGatherPadsToTheFullChunk) {
  // 5 on (4): chunks 2,2,1,0; every rank sends a padded 2 elements.
  RedistributePlan plan = CheckedPlan("S(0)", "R", {4}, {5});
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(plan.steps[0].bytes_per_rank, 3 * 2 * 4);
  EXPECT_NEAR(plan.total_cost_us, kLaunch + 3 * kHop + 24 / kBytesPerUs, 1e-9);
  // 18 on (4,2): chunks of 5, then of 3: 3 elements padded, 7 ranks send.
  plan = CheckedPlan("S(0),S(0)", "R,R", {4, 2}, {18});
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(plan.steps[0].bytes_per_rank, 7 * 3 * 4);
  EXPECT_NEAR(plan.total_cost_us, kLaunch + 7 * kHop + 84 / kBytesPerUs, 1e-9);
}

TEST(PlannerTest, EmptyTensorsMoveNoBytes) {
  struct Case {
    std::string from, to;
    std::vector<int64_t> mesh, shape;
  };
  const Case cases[] = {
      {"S(0),S(1)", "R,R", {2, 2}, {0, 8}},
      {"S(0),S(1)", "S(1),S(0)", {2, 2}, {0, 8}},
      {"P(sum)", "R", {4}, {8, 0}},
      {"S(0),S(0)", "S(1),R", {2, 2}, {8, 0}},
      {"P(sum),S(0)", "S(0),S(0)", {2, 3}, {0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.from + " -> " + c.to);
    const RedistributePlan plan = CheckedPlan(c.from, c.to, c.mesh, c.shape);
    ASSERT_FALSE(plan.steps.empty());
    for (const RedistributeStep& step : plan.steps) {
      EXPECT_EQ(step.bytes_per_rank, 0) << step.ToString();
    }
    EXPECT_LE(plan.total_cost_us,
              GatherThenSliceCostUs(c.from, c.mesh, c.shape))
        << plan.ToString();
  }
}

TEST(PlannerTest, ScalarsReduceAndGoPartial) {
  RedistributePlan plan = CheckedPlan("P(sum)", "R", {4}, {});
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, CommKind::kAllReduce);
  EXPECT_NEAR(plan.total_cost_us, kLaunch + 6 * kHop + 1.5 * 4 / kBytesPerUs,
              1e-9);
  plan = CheckedPlan("R", "P(min)", {4}, {});
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.total_cost_us, 0);
}

// Random pairs of shardings (all ops, every nesting order) on random meshes and
// shapes, even and uneven: every plan is a valid chain of contract steps and
// never costs more than gathering everything and slicing.
TEST(PlannerTest, RandomPairsAreValidAndBeatGatherThenSlice) {
  std::mt19937 rng(5);
  const std::vector<std::vector<int64_t>> meshes = {
      {3}, {2, 2}, {4, 2}, {2, 3}, {1, 4}, {2, 2, 2}, {3, 2, 2}};
  for (int trial = 0; trial < 600; ++trial) {
    const std::vector<int64_t>& mesh = meshes[rng() % meshes.size()];
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) {
      shape.push_back(rng() % 4 == 0 ? static_cast<int64_t>(rng() % 20)
                                     : int64_t{24} << (rng() % 8));
    }
    const std::vector<ModelSharding> shardings = reference::AllModelShardings(
        static_cast<int>(mesh.size()), rank, {0, 1, 2, 3});
    const ModelSharding& from = shardings[rng() % shardings.size()];
    ModelSharding to = shardings[rng() % shardings.size()];
    // Keep the pair legal: a Partial target needs Replicate or the same op.
    for (size_t m = 0; m < mesh.size(); ++m) {
      if (to.partial_op[m] != reference::kNotPartial &&
          !from.IsReplicate(static_cast<int>(m))) {
        to.partial_op[m] = from.partial_op[m];  // Same op, or Replicate.
      }
    }
    SCOPED_TRACE(from.ToText() + " -> " + to.ToText() + " on " +
                 absl::StrJoin(mesh, "x") + ", shape " +
                 absl::StrJoin(shape, "x"));
    const RedistributePlan plan =
        CheckedPlan(from.ToText(), to.ToText(), mesh, shape);
    EXPECT_LE(
        plan.total_cost_us,
        GatherThenSliceCostUs(from, MakeProblem(mesh, shape)) * (1 + 1e-12) +
            1e-9)
        << plan.ToString();
  }
}

// ---- Cheaper plans the planner misses (each a single contract step). ----

// R -> P(sum) is a free local step; it lets one reduce-scatter over all three
// mesh dims (in the target's nesting order) replace slice + reduce-scatter +
// permute (or all-reduce + slices).
TEST(PlannerGapTest, ReplicateToPartialThenOneReduceScatter) {
  struct Case {
    std::string from, to;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {
      {"R,P(sum),P(sum)", "S(0)[1],S(0)[0],S(0)[2]", {240000}},
      {"P(sum),P(sum),R", "S(0)[0],S(0)[2],S(0)[1]", {24, 24, 48}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.from + " -> " + c.to);
    const RedistributePlan plan = CheckedPlan(c.from, c.to, {2, 2, 2}, c.shape);
    double local = 4;
    for (int64_t size : c.shape) local *= size;
    // Local R -> P(sum), then one reduce-scatter over 8 ranks.
    EXPECT_LE(plan.total_cost_us,
              kLaunch + 7 * kHop + 7.0 / 8 * local / kBytesPerUs + 1e-9)
        << plan.ToString();
  }
}

// One all-to-all over the 4 ranks moves both mesh dims of tensor dim 0 to
// tensor dim 1; which one lands outermost is only a matter of which rank gets
// which piece, so the swapped order costs the same single exchange.
TEST(PlannerGapTest, AllToAllMayReorderTheMeshDimsItMoves) {
  const RedistributePlan plan =
      CheckedPlan("S(0),S(0)", "S(1)[1],S(1)[0]", {2, 2}, {480, 960});
  const double local = 120.0 * 960 * 4;
  EXPECT_LE(plan.total_cost_us,
            kLaunch + 3 * kHop + 0.75 * local / kBytesPerUs + 1e-9)
      << plan.ToString();
}

// Swapping the shards of mesh dims 1 and 2 exchanges blocks between ranks
// with the same mesh dim 0 coordinate: the permute never crosses the slow
// link of mesh dim 0, so it should be priced with the fast links.
TEST(PlannerGapTest, PermutePricesOnlyTheMeshDimsItSpans) {
  absl::StatusOr<CostModel> model =
      CostModel::Create({{19.3, 5.0}, {87.7, 0.6}, {87.7, 0.6}});
  ASSERT_TRUE(model.ok());
  absl::StatusOr<RedistributePlan> plan =
      PlanRedistribution(ParseShardingOrFail("R,S(0),S(1)", 2),
                         ParseShardingOrFail("R,S(1),S(0)", 2), {2, 2, 2},
                         {4096, 4096}, DType::kF32, *model);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double local = 2048.0 * 2048 * 4;
  EXPECT_LE(plan->total_cost_us, kLaunch + kHop + local / kBytesPerUs + 1e-9)
      << plan->ToString();
}

// With mesh dim 0 of size 1, both nesting orders of tensor dim 1 put the same
// block on every rank: the "permute" between them moves nothing.
TEST(PlannerGapTest, PermuteThatMovesNothingIsFree) {
  const RedistributePlan plan =
      CheckedPlan("S(0),S(1)", "S(1),S(1)", {1, 4}, {64, 64});
  EXPECT_EQ(plan.total_cost_us, 0) << plan.ToString();
}

}  // namespace
}  // namespace dtensor
