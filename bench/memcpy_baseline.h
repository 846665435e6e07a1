#ifndef DTENSOR_BENCH_MEMCPY_BASELINE_H_
#define DTENSOR_BENCH_MEMCPY_BASELINE_H_

#include "benchmark/benchmark.h"

namespace dtensor::bench {

// The memory-bandwidth yardstick for the elementwise and reduction
// benchmarks: std::memcpy of state.range(0) floats between two buffers
// allocated once. Bytes processed count both the bytes read and the bytes
// written (8 per float), as the kernel benchmarks count theirs.
void BM_Memcpy(benchmark::State& state);

// The same copy into a destination allocated (and freed) in every iteration,
// as an op that returns a new tensor must: for large buffers the allocator
// hands out fresh pages from the kernel, which are zeroed on first touch.
void BM_MemcpyIntoNewBuffer(benchmark::State& state);

}  // namespace dtensor::bench

#endif  // DTENSOR_BENCH_MEMCPY_BASELINE_H_
