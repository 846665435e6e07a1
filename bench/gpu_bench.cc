// GPU benchmarks (need a CUDA device; each reports an error and skips
// otherwise): the tensor Matmul on CUDA tensors against cuBLAS called
// directly on the same 4096^2 operands (bf16 and f32), and the elementwise
// add and the sum at 64M f32 elements against a device-to-device copy.
// Bandwidth counts bytes read plus bytes written.
#include <cstdint>

#include "benchmark/benchmark.h"
#include "tensor/cuda_backend.h"
#include "tensor/elementwise.h"
#include "tensor/matmul.h"
#include "tensor/reduction.h"
#include "tensor/tensor.h"

namespace dtensor {
namespace {

constexpr int64_t kMatrix = 4096;
constexpr int64_t kElements = int64_t{64} << 20;

bool SkipWithoutGpu(benchmark::State& state) {
  if (cuda::DeviceCount() > 0) return false;
  state.SkipWithError(("no usable CUDA device: " + cuda::Describe()).c_str());
  return true;
}

void Sync(benchmark::State& state) {
  if (!cuda::Synchronize(0).ok()) state.SkipWithError("synchronize failed");
}

DType DTypeArg(const benchmark::State& state) {
  return state.range(0) == 0 ? DType::kF32 : DType::kBF16;
}

void BM_TensorMatmul(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const DType dtype = DTypeArg(state);
  const Tensor a =
      *Tensor::Full({kMatrix, kMatrix}, 0.5, dtype, Device::CUDA(0));
  const Tensor b =
      *Tensor::Full({kMatrix, kMatrix}, 0.25, dtype, Device::CUDA(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Matmul(a, b));
    Sync(state);
  }
  state.counters["TFLOP/s"] = benchmark::Counter(
      2.0 * kMatrix * kMatrix * kMatrix * state.iterations() / 1e12,
      benchmark::Counter::kIsRate);
}

void BM_CublasDirect(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const DType dtype = DTypeArg(state);
  const Tensor a =
      *Tensor::Full({kMatrix, kMatrix}, 0.5, dtype, Device::CUDA(0));
  const Tensor b =
      *Tensor::Full({kMatrix, kMatrix}, 0.25, dtype, Device::CUDA(0));
  const Tensor c = *Tensor::Empty({kMatrix, kMatrix}, dtype, Device::CUDA(0));
  cuda::GemmArgs args;
  args.dtype = dtype;
  args.m = args.n = args.k = kMatrix;
  args.a = a.raw_data();
  args.b = b.raw_data();
  args.c = c.raw_data();
  args.lda = args.ldb = args.ldc = kMatrix;
  for (auto _ : state) {
    if (!cuda::Gemm(args, 0).ok()) state.SkipWithError("Gemm failed");
    Sync(state);
  }
  state.counters["TFLOP/s"] = benchmark::Counter(
      2.0 * kMatrix * kMatrix * kMatrix * state.iterations() / 1e12,
      benchmark::Counter::kIsRate);
}

void BM_DeviceCopy(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a = *Tensor::Ones({kElements}, DType::kF32, Device::CUDA(0));
  const Tensor b = *Tensor::Empty({kElements}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) {
    if (!cuda::Memcpy(b.raw_data(), a.raw_data(), a.nbytes(),
                      cuda::CopyKind::kDeviceToDevice, 0)
             .ok()) {
      state.SkipWithError("copy failed");
    }
    Sync(state);
  }
  state.SetBytesProcessed(2 * a.nbytes() * state.iterations());
}

void BM_Add(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a = *Tensor::Ones({kElements}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Add(a, a));
    Sync(state);
  }
  state.SetBytesProcessed(3 * a.nbytes() * state.iterations());
}

void BM_Sum(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a =
      *Tensor::Ones({kElements / 4096, 4096}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Sum(a, {1}));
    Sync(state);
  }
  state.SetBytesProcessed(a.nbytes() * state.iterations());
}

// Dispatch and launch of a tiny op on a CUDA tensor (the kernel is negligible).
void BM_SmallOpDispatch(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a = *Tensor::Ones({16}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) benchmark::DoNotOptimize(Add(a, a));
  Sync(state);
}

BENCHMARK(BM_TensorMatmul)->Arg(0)->Arg(1)->ArgName("bf16")->UseRealTime();
BENCHMARK(BM_CublasDirect)->Arg(0)->Arg(1)->ArgName("bf16")->UseRealTime();
BENCHMARK(BM_DeviceCopy)->UseRealTime();
BENCHMARK(BM_Add)->UseRealTime();
BENCHMARK(BM_Sum)->UseRealTime();
BENCHMARK(BM_SmallOpDispatch);

}  // namespace
}  // namespace dtensor
