// `dtensor explain` time: one metadata-only training step of each shipped
// Llama config (tiny on (dp=2, tp=2); 1B, 8B, 70B and 405B on (dp=64, tp=8),
// 512 ranks) under the tp_dp and tp_sp_fsdp plans, report and JSON
// included. The propagation cache is cleared before every iteration, as in
// a fresh `dtensor explain` process (the redistribution planner's cache has
// no Clear and stays warm after the first iteration). Run with
// `bazel run -c opt //bench:explain_bench` (reads parallel/plans from
// the runfiles).
#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/parallel/plan.h"
#include "tools/explain.h"
#include "tools/explain_config.h"
#include "tools/explain_format.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

constexpr const char* kConfigs[] = {"tiny", "1b", "8b", "70b", "405b"};
constexpr const char* kPlans[] = {"tp_dp", "tp_sp_fsdp"};

void BM_Explain(benchmark::State& state) {
  const std::string config_name = kConfigs[state.range(0)];
  const std::string plan_name = kPlans[state.range(1)];
  absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig(config_name);
  absl::StatusOr<parallel::Plan> plan = parallel::LoadPlanFile(
      absl::StrCat("parallel/plans/", plan_name, ".json"));
  absl::StatusOr<DeviceMesh> mesh =
      ParseMeshFlag(config_name == "tiny" ? "dp=2,tp=2" : "dp=64,tp=8");
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
  state.SetLabel(absl::StrCat(config_name, " ", plan_name, " ",
                              mesh->ToString().substr(0, 24)));
}
BENCHMARK(BM_Explain)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace
}  // namespace dtensor
