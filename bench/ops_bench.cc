// The cost of dispatching an op on DTensors beyond its kernel: cached
// propagation + redistribution lookup + kernel call + output wrapping, with
// tiny tensors so that the kernel is negligible (BM_LocalKernel times the
// bare tensor-layer kernels for comparison), on a real rank and in
// metadata-only mode, on 1-D and 3-D meshes; a propagation cache hit against
// a miss; and a whole model (8 tensor-parallel blocks, 89 ops) on 4096
// metadata-only ranks.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/rank_zero.h"
#include "benchmark/benchmark.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/registry.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/matmul.h"

namespace dtensor {
namespace {

using bench::OnesOfRankZero;
using bench::RankZero;

// A mesh and the layouts of the two [8, 8] operands on it, chosen so that
// add(a, a), mm(a, b) and sum(a, dim 1) redistribute nothing.
struct MeshCase {
  std::vector<int64_t> mesh;
  const char* a;
  const char* b;
};

const MeshCase kMeshes[] = {
    {{8}, "S(0)", "R"},
    {{2, 2, 2}, "S(0),R,S(1)", "R,R,S(0)"},
};

enum class Op { kAdd, kMm, kSum };

absl::StatusOr<DTensor> Call(Op op, const DTensor& a, const DTensor& b) {
  switch (op) {
    case Op::kAdd:
      return ops::Add(a, a);
    case Op::kMm:
      return ops::Mm(a, b);
    case Op::kSum:
      return ops::Sum(a, {1});
  }
  return a;
}

const char* Name(Op op) {
  return op == Op::kAdd ? "add" : op == Op::kMm ? "mm" : "sum";
}

// Cached dispatch of `op`; range(0): mesh case, range(1): 1 for a real
// rank, 0 for metadata-only.
template <Op kOp>
void BM_Dispatch(benchmark::State& state) {
  const MeshCase& c = kMeshes[state.range(0)];
  const DeviceMesh mesh = *DeviceMesh::Create(c.mesh);
  const bool real = state.range(1) == 1;
  RankZero rank(mesh.size());
  const std::shared_ptr<Runtime> runtime =
      real ? rank.runtime() : Runtime::MetadataOnly(0);
  const DTensor a = OnesOfRankZero(runtime, mesh, c.a);
  const DTensor b = OnesOfRankZero(runtime, mesh, c.b);
  if (!Call(kOp, a, b).ok()) state.SkipWithError("dispatch failed");
  for (auto _ : state) {
    absl::StatusOr<DTensor> out = Call(kOp, a, b);
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel(std::string(Name(kOp)) + (real ? " real" : " metadata") +
                 " mesh " + std::to_string(c.mesh.size()) + "-D " + c.a);
}
BENCHMARK_TEMPLATE(BM_Dispatch, Op::kAdd)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->Unit(benchmark::kNanosecond);
BENCHMARK_TEMPLATE(BM_Dispatch, Op::kMm)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->Unit(benchmark::kNanosecond);
BENCHMARK_TEMPLATE(BM_Dispatch, Op::kSum)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->Unit(benchmark::kNanosecond);

// The bare tensor-layer kernels on rank 0's shapes of the 1-D case (add of
// [1, 8]; mm of [1, 8] and [8, 8]), to subtract.
void BM_LocalKernel(benchmark::State& state) {
  const bool mm = state.range(0) == 1;
  const Tensor a = *Tensor::Ones({1, 8}, DType::kF32);
  const Tensor b = *Tensor::Ones({8, 8}, DType::kF32);
  for (auto _ : state) {
    absl::StatusOr<Tensor> out = mm ? Matmul(a, b) : Add(a, a);
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel(mm ? "mm [1,8]x[8,8]" : "add [1,8]");
}
BENCHMARK(BM_LocalKernel)->Arg(0)->Arg(1)->Unit(benchmark::kNanosecond);

// The propagation cache alone: a hit, and a miss (the cache emptied every
// iteration; the planner's own cache stays warm). range(0): mesh case.
void BM_PropagationCache(benchmark::State& state) {
  const MeshCase& c = kMeshes[state.range(0)];
  const bool miss = state.range(1) == 1;
  const DeviceMesh mesh = *DeviceMesh::Create(c.mesh);
  auto runtime = Runtime::MetadataOnly(0);
  const DTensor a = OnesOfRankZero(runtime, mesh, c.a);
  const DTensor b = OnesOfRankZero(runtime, mesh, c.b);
  const OpDef& mm = **OpRegistry::Builtin().Find("mm");
  const DTensorSpec* inputs[] = {&a.spec(), &b.spec()};
  const OpArgs args;
  PropagationCache& cache = PropagationCache::Shared();
  for (auto _ : state) {
    if (miss) cache.Clear();
    auto propagation = cache.Get(mm, inputs, args, *runtime);
    benchmark::DoNotOptimize(propagation);
  }
  state.SetLabel(std::string(miss ? "miss" : "hit") + " mm mesh " +
                 std::to_string(c.mesh.size()) + "-D");
}
BENCHMARK(BM_PropagationCache)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// 8 blocks of colwise mm, bias, gelu, a softmax over the sharded features,
// rowwise mm, residual, relu, then a mean: 89 ops on a dp x cp x tp =
// 8 x 64 x 8 mesh of 4096 metadata-only ranks. range(0): 1 to empty the
// propagation cache before every model run.
void BM_MetadataModel4096(benchmark::State& state) {
  const bool cold = state.range(0) == 1;
  const DeviceMesh mesh = *DeviceMesh::Create({8, 64, 8});
  auto runtime = Runtime::MetadataOnly(0);
  const auto make = [&](Shape shape, const char* sharding_text) {
    const Sharding sharding =
        *Sharding::Parse(sharding_text, static_cast<int64_t>(shape.size()));
    return *DTensor::FromSpec(
        runtime, *DTensorSpec::Create(mesh, sharding, shape, DType::kF32));
  };
  const DTensor input = make({1024, 64}, "S(0),S(0),R");
  const DTensor w1 = make({64, 256}, "R,R,S(1)");
  const DTensor b1 = make({256}, "R,R,S(0)");
  const DTensor w2 = make({256, 64}, "R,R,S(0)");
  int64_t ops_run = 0;
  for (auto _ : state) {
    if (cold) PropagationCache::Shared().Clear();
    DTensor x = input;
    for (int layer = 0; layer < 8; ++layer) {
      DTensor h = *ops::Add(*ops::Mm(x, w1), b1);
      DTensor g = *ops::Gelu(h);
      DTensor e = *ops::Exp(*ops::Sub(g, *ops::Amax(g, {1}, true)));
      DTensor p = *ops::Div(e, *ops::Sum(e, {1}, true));
      x = *ops::Relu(*ops::Add(*ops::Mm(p, w2), x));
      ops_run += 11;
    }
    benchmark::DoNotOptimize(*ops::Mean(x));
    ++ops_run;
  }
  state.counters["ops"] = benchmark::Counter(
      static_cast<double>(ops_run),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(cold ? "cache emptied per run" : "cache warm");
}
BENCHMARK(BM_MetadataModel4096)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dtensor
