// `dtensor explain` time: one metadata-only training step of each shipped
// Llama config (tiny on (dp=2, tp=2); 1B, 8B, 70B and 405B on (dp=64, tp=8),
// 512 ranks) under the tp_dp and tp_sp_fsdp plans, report and JSON
// included; and the 70B step's time against the number of ranks (64 to
// 32,768). The propagation cache is cleared before every iteration, as in
// a fresh `dtensor explain` process (BM_Explain keeps the redistribution
// planner's cache warm after its first iteration; BM_ExplainRanks runs once,
// with both caches cold). Run with
// `bazel run -c opt //bench:explain_bench` (reads parallel/plans from
// the runfiles).
#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/redistribute/planner.h"
#include "tools/explain.h"
#include "tools/explain_config.h"
#include "tools/explain_format.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

constexpr const char* kConfigs[] = {"tiny", "1b", "8b", "70b", "405b"};
constexpr const char* kPlans[] = {"tp_dp", "tp_sp_fsdp"};

// Runs `dtensor explain` on `mesh_text` as a fresh process would (the
// propagation cache cleared every iteration), labelling `state`.
void RunExplain(benchmark::State& state, const std::string& config_name,
                const std::string& plan_name, const std::string& mesh_text) {
  absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig(config_name);
  absl::StatusOr<parallel::Plan> plan = parallel::LoadPlanFile(
      absl::StrCat("parallel/plans/", plan_name, ".json"));
  absl::StatusOr<DeviceMesh> mesh = ParseMeshFlag(mesh_text);
  if (!config.ok() || !plan.ok() || !mesh.ok()) {
    state.SkipWithError("cannot load the config, plan or mesh");
    return;
  }
  ExplainRequest request{config_name, plan_name, *config, *plan, *mesh};
  request.batch = mesh->shape()[0];
  request.seq = std::min<int64_t>(config->max_seq_len, 2048);
  int64_t collectives = 0;
  for (auto _ : state) {
    PropagationCache::Shared().Clear();
    absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request);
    if (!report.ok()) {
      state.SkipWithError(report.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(ExplainJson(*report));
    collectives = report->step.collectives;
  }
  state.counters["collectives"] = static_cast<double>(collectives);
  state.counters["ranks"] = static_cast<double>(mesh->size());
  state.SetLabel(absl::StrCat(config_name, " ", plan_name, " ", mesh_text));
}

void BM_Explain(benchmark::State& state) {
  const std::string config_name = kConfigs[state.range(0)];
  RunExplain(state, config_name, kPlans[state.range(1)],
             config_name == "tiny" ? "dp=2,tp=2" : "dp=64,tp=8");
}
BENCHMARK(BM_Explain)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// Rank 0's view of the 70B tp_sp_fsdp step against the number of ranks: dp
// from 8 to 4096 beside tp=8 (64 to 32,768 ranks; the batch grows with dp),
// and dp=128 with a pp=1 mesh dim, which should cost what dp=128 costs.
void BM_ExplainRanks(benchmark::State& state) {
  const int64_t dp = state.range(0);
  RedistributePlanner::Shared().Clear();
  RunExplain(state, "70b", "tp_sp_fsdp",
             state.range(1) ? absl::StrCat("dp=", dp, ",pp=1,tp=8")
                            : absl::StrCat("dp=", dp, ",tp=8"));
}
BENCHMARK(BM_ExplainRanks)
    ->Args({8, 0})
    ->Args({64, 0})
    ->Args({128, 0})
    ->Args({128, 1})
    ->Args({512, 0})
    ->Args({1024, 0})
    ->Args({4096, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace dtensor
