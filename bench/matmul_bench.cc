// dtensor's Matmul against cblas_sgemm called directly on the same square f32
// problems. Matmul hands contiguous (and transposed-view) operands to sgemm
// without copies, so the two should run at the same speed; GFLOP/s counts
// 2 * n^3 flops per product over wall time (OpenBLAS uses every core).

#include <cblas.h>

#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace {

Tensor RandomMatrix(int64_t n, uint64_t seed) {
  Generator generator(seed);
  return Tensor::Uniform({n, n}, -1.0, 1.0, generator).value();
}

void SetGflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(n * n * n) * state.iterations(),
      benchmark::Counter::kIsRate);
}

void BM_DirectSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = RandomMatrix(n, 1);
  const Tensor b = RandomMatrix(n, 2);
  std::vector<float> c(n * n);
  const int size = static_cast<int>(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size,
                1.0f, a.data<float>(), size, b.data<float>(), size, 0.0f,
                c.data(), size);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  SetGflops(state, n);
}

// dtensor's Matmul on the same operands, b contiguous or, when
// `transposed_b`, a transposed view (which Matmul passes to sgemm as
// CblasTrans).
void TimeDtensorMatmul(benchmark::State& state, bool transposed_b) {
  const int64_t n = state.range(0);
  const Tensor a = RandomMatrix(n, 1);
  Tensor b = RandomMatrix(n, 2);
  if (transposed_b) b = b.Transpose(0, 1).value();
  for (auto _ : state) {
    Tensor c = Matmul(a, b).value();
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  SetGflops(state, n);
}

void BM_DtensorMatmul(benchmark::State& state) {
  TimeDtensorMatmul(state, /*transposed_b=*/false);
}

void BM_DtensorMatmulTransposedB(benchmark::State& state) {
  TimeDtensorMatmul(state, /*transposed_b=*/true);
}

BENCHMARK(BM_DirectSgemm)->Arg(256)->Arg(512)->Arg(1024)->UseRealTime();
BENCHMARK(BM_DtensorMatmul)->Arg(256)->Arg(512)->Arg(1024)->UseRealTime();
BENCHMARK(BM_DtensorMatmulTransposedB)->Arg(1024)->UseRealTime();

}  // namespace
}  // namespace dtensor
