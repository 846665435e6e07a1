// Redistribution planning time: uncached (a fresh A* search) and cached (a hit
// in RedistributePlanner's cache), on 1-D to 4-D meshes, plus the throughput
// of executing a redistribution on in-process ranks; and an uncached search
// against the number of ranks.
#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/sharding.h"

namespace dtensor {
namespace {

// One planning problem per mesh rank: a layout change that needs several
// collectives.
struct Problem {
  std::vector<int64_t> mesh;
  std::vector<int64_t> shape;
  const char* from;
  const char* to;
};

const Problem kProblems[] = {
    {{8}, {4096, 4096}, "S(0)", "S(1)"},
    {{4, 8}, {4096, 4096}, "S(0),S(1)", "S(1),S(0)"},
    {{2, 2, 2}, {64, 64, 64}, "S(0),S(1),P", "R,S(2),S(1)"},
    {{2, 2, 2}, {1024, 1024}, "S(0),S(1),R", "R,S(0),S(1)"},
    {{2, 4, 8}, {8192, 8192}, "R,S(0),S(1)", "S(0),R,S(1)"},
    {{2, 4, 4, 8}, {64, 4096, 4096}, "S(0),S(1),R,P", "R,S(2),S(1),S(0)"},
    // Problem 3 with uneven blocks: the search's bytes bound needs even ones,
    // so only its launch-and-hop bound guides it.
    {{2, 2, 2}, {66, 64, 62}, "S(0),S(1),P", "R,S(2),S(1)"},
};

// Problem `number` (1-based, the benchmark's argument) with its layouts
// parsed and the default cost model of its mesh; labels `state` with the
// layout change.
struct ParsedProblem {
  ParsedProblem(int64_t number, benchmark::State& state)
      : p(kProblems[number - 1]),
        from(*Sharding::Parse(p.from, static_cast<int64_t>(p.shape.size()))),
        to(*Sharding::Parse(p.to, static_cast<int64_t>(p.shape.size()))),
        model(static_cast<int64_t>(p.mesh.size())) {
    state.SetLabel(std::string(p.from) + " -> " + p.to);
  }
  const Problem& p;
  const Sharding from;
  const Sharding to;
  const CostModel model;
};

void BM_PlanUncached(benchmark::State& state) {
  const ParsedProblem q(state.range(0), state);
  for (auto _ : state) {
    auto plan = PlanRedistribution(q.from, q.to, q.p.mesh, q.p.shape,
                                   DType::kF32, q.model);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanUncached)->DenseRange(1, 7)->Unit(benchmark::kMicrosecond);

// An uncached search on a 3-D mesh (dp, 4, 8) against dp, 2 to 1024 (64 to
// 32,768 ranks), with uneven blocks (1000 rows), so the permutes must compare
// the blocks of shardings: its time should not grow with the ranks.
void BM_PlanUncachedRanks(benchmark::State& state) {
  const std::vector<int64_t> mesh = {state.range(0), 4, 8};
  const std::vector<int64_t> shape = {1000, 8192};
  const Sharding from = *Sharding::Parse("S(0),S(1),S(0)", 2);
  const Sharding to = *Sharding::Parse("S(0),S(0),S(1)", 2);
  const CostModel model(3);
  for (auto _ : state) {
    auto plan = PlanRedistribution(from, to, mesh, shape, DType::kF32, model);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["ranks"] = static_cast<double>(state.range(0) * 32);
}
BENCHMARK(BM_PlanUncachedRanks)
    ->RangeMultiplier(8)
    ->Range(2, 1024)
    ->Unit(benchmark::kMicrosecond);

void BM_PlanCached(benchmark::State& state) {
  const ParsedProblem q(state.range(0), state);
  RedistributePlanner& planner = RedistributePlanner::Shared();
  auto warm =
      planner.Plan(q.from, q.to, q.p.mesh, q.p.shape, DType::kF32, q.model);
  for (auto _ : state) {
    auto plan =
        planner.Plan(q.from, q.to, q.p.mesh, q.p.shape, DType::kF32, q.model);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanCached)->DenseRange(1, 7)->Unit(benchmark::kNanosecond);

// S(0) -> S(1) (one all-to-all) of a 2048x2048 f32 tensor on 4 in-process
// ranks; bytes processed count the whole tensor.
void BM_RedistributeAllToAll(benchmark::State& state) {
  const int64_t n = 2048;
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  LocalCluster cluster(4);
  for (auto _ : state) {
    absl::Status status = cluster.Run([&](ProcessGroups& groups) {
      auto runtime = Runtime::ForRank(groups);
      Tensor local = *Tensor::Ones({n / 4, n}, DType::kF32);
      FromLocalOptions options;
      options.global_shape = Shape{n, n};
      absl::StatusOr<DTensor> x = DTensor::FromLocal(
          runtime, local, mesh, {Placement::Shard(0)}, options);
      if (!x.ok()) return x.status();
      for (int i = 0; i < 8; ++i) {
        absl::StatusOr<DTensor> y = x->Redistribute({Placement::Shard(1)});
        if (!y.ok()) return y.status();
        benchmark::DoNotOptimize(y->ToLocal());
      }
      return absl::OkStatus();
    });
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  }
  state.SetBytesProcessed(state.iterations() * 8 * n * n * 4);
}
BENCHMARK(BM_RedistributeAllToAll)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtensor
