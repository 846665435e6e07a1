#include "bench/memcpy_baseline.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dtensor::bench {
namespace {

void SetBytes(benchmark::State& state, int64_t n) {
  state.SetBytesProcessed(state.iterations() * 2 * n *
                          static_cast<int64_t>(sizeof(float)));
}

}  // namespace

void BM_Memcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> src(n, 1.0f);
  std::vector<float> dst(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, n);
}

void BM_MemcpyIntoNewBuffer(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> src(n, 1.0f);
  for (auto _ : state) {
    // 64-byte aligned like tensor storage; n is a multiple of 16 here.
    void* dst = std::aligned_alloc(64, n * sizeof(float));
    std::memcpy(dst, src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
    std::free(dst);
  }
  SetBytes(state, n);
}

}  // namespace dtensor::bench
