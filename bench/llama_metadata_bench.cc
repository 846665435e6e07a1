// A metadata-only forward of a Llama-class layer stack on a (64, 8) mesh:
// no data, layouts propagated and collectives counted, as `dtensor explain`
// will do. Parameters are laid out Megatron-style on the tp mesh dim (wq, wk,
// wv, w1, w3 and the output split on their out features, wo and w2 on their
// in features), tokens sharded over dp.
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "benchmark/benchmark.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/llama.h"
#include "dtensor/ops/propagation_cache.h"

namespace dtensor {
namespace {

// Colwise weights split dim 0 (out features) on tp, rowwise ones dim 1.
absl::StatusOr<Sharding> TensorParallelSharding(absl::string_view fqn,
                                                const Shape& shape) {
  const char* placements = "R,R";
  for (const char* colwise : {"wq.weight", "wk.weight", "wv.weight",
                              "w1.weight", "w3.weight", "output.weight"}) {
    if (absl::EndsWith(fqn, colwise)) placements = "R,S(0)";
  }
  for (const char* rowwise : {"wo.weight", "w2.weight"}) {
    if (absl::EndsWith(fqn, rowwise)) placements = "R,S(1)";
  }
  return Sharding::Parse(placements, static_cast<int64_t>(shape.size()));
}

void BM_MetadataLlamaForward(benchmark::State& state) {
  nn::LlamaConfig config = nn::LlamaConfig::Llama3_70B();
  config.n_layers = static_cast<int>(state.range(0));
  const bool warm_cache = state.range(1) != 0;
  auto runtime = Runtime::MetadataOnly(/*rank=*/100);
  const DeviceMesh mesh = *DeviceMesh::Create({64, 8}, {"dp", "tp"});
  nn::InitOptions options;
  options.dtype = DType::kBF16;
  options.sharding = TensorParallelSharding;
  auto model = nn::BuildLlama(config, runtime, mesh, options);
  if (!model.ok()) {
    state.SkipWithError(model.status().ToString().c_str());
    return;
  }
  const DTensor tokens = *DTensor::FromSpec(
      runtime,
      *DTensorSpec::Create(mesh, {Placement::Shard(0), Placement::Replicate()},
                           {64, 2048}, DType::kI64));
  int64_t collectives = 0;
  for (auto _ : state) {
    if (!warm_cache) {
      state.PauseTiming();
      PropagationCache::Shared().Clear();
      state.ResumeTiming();
    }
    CommCounter counter;
    CommCounter::Scope scope(counter);
    absl::StatusOr<DTensor> logits = (**model)(tokens);
    if (!logits.ok()) {
      state.SkipWithError(logits.status().ToString().c_str());
      return;
    }
    collectives = counter.total_collectives();
    for (CommKind kind :
         {CommKind::kAllGather, CommKind::kAllReduce, CommKind::kReduceScatter,
          CommKind::kAllToAll, CommKind::kPermute}) {
      state.counters[std::string(CommKindName(kind))] =
          static_cast<double>(counter.count(kind));
    }
  }
  state.counters["collectives"] = static_cast<double>(collectives);
  state.SetLabel(warm_cache ? "warm propagation cache" : "cold cache");
}
BENCHMARK(BM_MetadataLlamaForward)
    ->Args({8, 1})
    ->Args({8, 0})
    ->Args({80, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtensor
