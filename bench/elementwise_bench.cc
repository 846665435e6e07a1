// Throughput of large contiguous f32 elementwise ops next to memcpy. Bytes
// processed count every byte read and written: 12 per element for add and
// mul (two inputs, one output), 8 for exp and for memcpy. Each op allocates
// its result, as the API does; BM_MemcpyIntoNewBuffer shows what that costs
// a plain copy.

#include <cstdint>

#include "absl/status/statusor.h"
#include "bench/memcpy_baseline.h"
#include "benchmark/benchmark.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace {

Tensor RandomVector(int64_t n, uint64_t seed) {
  Generator generator(seed);
  return Tensor::Uniform({n}, -1.0, 1.0, generator).value();
}

void SetBytes(benchmark::State& state, int64_t n, int64_t bytes_per_element) {
  state.SetBytesProcessed(state.iterations() * n * bytes_per_element);
}

void BM_Binary(benchmark::State& state,
               absl::StatusOr<Tensor> (*op)(const Tensor&, const Tensor&)) {
  const int64_t n = state.range(0);
  const Tensor a = RandomVector(n, 1);
  const Tensor b = RandomVector(n, 2);
  // One untimed call: the loop then measures the steady state of a training
  // loop, where the result buffer comes back from the large-buffer cache
  // (BM_MemcpyIntoNewBuffer shows the cost of fresh memory).
  benchmark::DoNotOptimize(op(a, b).value().raw_data());
  for (auto _ : state) {
    Tensor c = op(a, b).value();
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, n, 3 * sizeof(float));
}

void BM_Exp(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = RandomVector(n, 1);
  benchmark::DoNotOptimize(Exp(a).value().raw_data());  // As in BM_Binary.
  for (auto _ : state) {
    Tensor c = Exp(a).value();
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, n, 2 * sizeof(float));
}

constexpr int64_t kMin = int64_t{1} << 20;
constexpr int64_t kMax = int64_t{1} << 26;

BENCHMARK(bench::BM_Memcpy)->RangeMultiplier(4)->Range(kMin, kMax);
BENCHMARK(bench::BM_MemcpyIntoNewBuffer)->RangeMultiplier(4)->Range(kMin, kMax);
BENCHMARK_CAPTURE(BM_Binary, Add, Add)->RangeMultiplier(4)->Range(kMin, kMax);
BENCHMARK_CAPTURE(BM_Binary, Mul, Mul)->RangeMultiplier(4)->Range(kMin, kMax);
BENCHMARK(BM_Exp)->RangeMultiplier(4)->Range(kMin, kMax);

}  // namespace
}  // namespace dtensor
