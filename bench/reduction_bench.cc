// Throughput of f32 reductions next to memcpy. Bytes processed count the
// bytes read (4 per element; the results are small); memcpy counts the bytes
// it reads and writes. Sum over everything, over the innermost dim and over
// the outer dim of a [n / 256, 256] matrix: the last two take the fold-a-run
// and the accumulate-a-row loops.

#include <cstdint>
#include <vector>

#include "bench/memcpy_baseline.h"
#include "benchmark/benchmark.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace {

constexpr int64_t kRowLength = 256;

Tensor RandomMatrix(int64_t n) {
  Generator generator(1);
  return Tensor::Uniform({n / kRowLength, kRowLength}, -1.0, 1.0, generator)
      .value();
}

// Reduces a [n / 256, 256] f32 matrix over `dims` ({} = everything).
void BM_Sum(benchmark::State& state, std::vector<int64_t> dims) {
  const int64_t n = state.range(0);
  const Tensor a = RandomMatrix(n);
  for (auto _ : state) {
    Tensor sum = Sum(a, dims).value();
    benchmark::DoNotOptimize(sum.raw_data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}

void BM_Max(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = RandomMatrix(n);
  for (auto _ : state) {
    Tensor max = Max(a).value();
    benchmark::DoNotOptimize(max.raw_data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}

constexpr int64_t kMin = int64_t{1} << 20;
constexpr int64_t kMax = int64_t{1} << 26;

BENCHMARK(bench::BM_Memcpy)->RangeMultiplier(4)->Range(kMin, kMax);
BENCHMARK_CAPTURE(BM_Sum, All, std::vector<int64_t>{})
    ->RangeMultiplier(4)
    ->Range(kMin, kMax);
BENCHMARK_CAPTURE(BM_Sum, InnerDim, std::vector<int64_t>{1})
    ->RangeMultiplier(4)
    ->Range(kMin, kMax);
BENCHMARK_CAPTURE(BM_Sum, OuterDim, std::vector<int64_t>{0})
    ->RangeMultiplier(4)
    ->Range(kMin, kMax);
BENCHMARK(BM_Max)->RangeMultiplier(4)->Range(kMin, kMax);

}  // namespace
}  // namespace dtensor
