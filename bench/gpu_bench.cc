// GPU benchmarks (need a CUDA device; each reports an error and skips
// otherwise): the tensor Matmul on CUDA tensors against cuBLAS called
// directly on the same 4096^2 operands (bf16 and f32), the elementwise
// add, a cast f32 -> bf16, a broadcast add, the fused SwiGLU forward and
// backward (against the ops they replace), the residual add + RMSNorm and
// its backward on [4096, 2048] bf16 fused and unfused, the sum at 64M
// elements against a device-to-device copy,
// causal grouped-query attention forward, and forward + backward at the
// shapes of bench/peer/gpu_torch.py's SDPA figure, cross entropy forward and
// forward + backward over Llama-3 logits [4096, 128256] bf16, the
// embedding's table gradient at Llama-1B's shape, the dispatch
// of a tiny op on the tensor and DTensor layers, and AdamW over the 2-layer
// Llama-1B parameter set, per parameter against the multi-tensor step.
// Bandwidth counts bytes read plus bytes written.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/rank_zero.h"
#include "benchmark/benchmark.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/registry.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/fused_norm.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/tensor/swiglu.h"
#include "dtensor/tensor/tensor.h"

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

// A kMatrix x kMatrix operand of `dtype` on the GPU, every element `value`.
Tensor GpuMatrix(DType dtype, double value) {
  return *Tensor::Full({kMatrix, kMatrix}, value, dtype, Device::CUDA(0));
}

// Reports `flops` per iteration as the rate "TFLOP/s".
void SetTflops(benchmark::State& state, double flops) {
  state.counters["TFLOP/s"] = benchmark::Counter(
      flops * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}

// The flops of one kMatrix^3 product.
constexpr double kMatmulFlops = 2.0 * kMatrix * kMatrix * kMatrix;

void BM_TensorMatmul(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a = GpuMatrix(DTypeArg(state), 0.5);
  const Tensor b = GpuMatrix(DTypeArg(state), 0.25);
  for (auto _ : state) {
    benchmark::DoNotOptimize(Matmul(a, b));
    Sync(state);
  }
  SetTflops(state, kMatmulFlops);
}

void BM_CublasDirect(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const DType dtype = DTypeArg(state);
  const Tensor a = GpuMatrix(dtype, 0.5);
  const Tensor b = GpuMatrix(dtype, 0.25);
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
  SetTflops(state, kMatmulFlops);
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

// A cast of 64M f32 elements to bf16 (4 bytes read, 2 written each).
void BM_CastF32ToBf16(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a = *Tensor::Ones({kElements}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(a.To(DType::kBF16));
    Sync(state);
  }
  state.SetBytesProcessed(6 * kElements * state.iterations());
}

// [8192, 8192] + [8192] in f32: the strided kernel (a broadcast operand);
// the row is read from cache, so the traffic is one read and one write.
void BM_BroadcastAdd(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const int64_t side = 8192;
  const Tensor a = *Tensor::Ones({side, side}, DType::kF32, Device::CUDA(0));
  const Tensor row = *Tensor::Ones({side}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Add(a, row));
    Sync(state);
  }
  state.SetBytesProcessed(2 * a.nbytes() * state.iterations());
}

// SwiGLU forward (two reads, one write) and backward (three reads, two
// writes) over 64M elements of f32 (arg 0) or bf16 (1), fused (arg fused 1)
// or as the ops it replaces (silu and mul; silu, mul, silu_backward, mul):
// bytes count what the fused kernel moves, so the rates compare times.
void BM_SwiGlu(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const DType dtype = DTypeArg(state);
  const Tensor a = *Tensor::Full({kElements}, 0.5, dtype, Device::CUDA(0));
  const Tensor b = *Tensor::Full({kElements}, 0.25, dtype, Device::CUDA(0));
  const bool fused = state.range(1) == 1;
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(SwiGlu(a, b));
    } else {
      benchmark::DoNotOptimize(Mul(*Silu(a), b));
    }
    Sync(state);
  }
  state.SetBytesProcessed(3 * a.nbytes() * state.iterations());
}

void BM_SwiGluBackward(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const DType dtype = DTypeArg(state);
  const Tensor g = *Tensor::Full({kElements}, 0.1, dtype, Device::CUDA(0));
  const Tensor a = *Tensor::Full({kElements}, 0.5, dtype, Device::CUDA(0));
  const Tensor b = *Tensor::Full({kElements}, 0.25, dtype, Device::CUDA(0));
  const bool fused = state.range(1) == 1;
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(SwiGluBackward(g, a, b));
    } else {
      benchmark::DoNotOptimize(Mul(g, *Silu(a)));
      benchmark::DoNotOptimize(SiluBackward(*Mul(g, b), a));
    }
    Sync(state);
  }
  state.SetBytesProcessed(5 * a.nbytes() * state.iterations());
}

// The residual add + RMSNorm of a Llama block on [4096, 2048] bf16, fused
// (arg fused 1: AddRmsNorm, two reads and two writes) or as Add then RmsNorm
// (three reads, two writes), and its backward (fused: AddRmsNormBackward, three
// reads and one write; else RmsNormBackward then the residual gradient's Add,
// four reads and two writes), with a weight: bytes count what the fused kernel
// moves, so the rates compare times.
constexpr int64_t kNormRows = 4096;
constexpr int64_t kNormWidth = 2048;

void BM_AddRmsNorm(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Device gpu = Device::CUDA(0);
  const Shape shape = {kNormRows, kNormWidth};
  const Tensor residual = *Tensor::Full(shape, 0.5, DType::kBF16, gpu);
  const Tensor delta = *Tensor::Full(shape, 0.25, DType::kBF16, gpu);
  const Tensor weight = *Tensor::Ones({kNormWidth}, DType::kBF16, gpu);
  const bool fused = state.range(0) == 1;
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(AddRmsNorm(residual, delta, weight));
    } else {
      benchmark::DoNotOptimize(RmsNorm(*Add(residual, delta), weight));
    }
    Sync(state);
  }
  state.SetBytesProcessed(4 * residual.nbytes() * state.iterations());
}

void BM_AddRmsNormBackward(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Device gpu = Device::CUDA(0);
  const Shape shape = {kNormRows, kNormWidth};
  const Tensor sum = *Tensor::Full(shape, 0.5, DType::kBF16, gpu);
  const Tensor grad = *Tensor::Full(shape, 0.1, DType::kBF16, gpu);
  const Tensor grad_sum = *Tensor::Full(shape, 0.2, DType::kBF16, gpu);
  const Tensor weight = *Tensor::Ones({kNormWidth}, DType::kBF16, gpu);
  const bool fused = state.range(0) == 1;
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(AddRmsNormBackward(sum, weight, grad, grad_sum));
    } else {
      const NormGrads grads = *RmsNormBackward(sum, weight, grad);
      benchmark::DoNotOptimize(Add(grads.dx, grad_sum));
    }
    Sync(state);
  }
  state.SetBytesProcessed(4 * sum.nbytes() * state.iterations());
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

// Causal grouped-query attention in bf16 (batch 4, 32 query heads over 8 kv
// heads, head dim 128, sequence range(0)): the tensor-core path of
// dtensor/tensor/cuda/attention_mma_kernels.h (bf16 products, f32
// accumulation and softmax, no [seq, seq] scores):
// q [4, 8, 4, seq, 128], k = v [4, 8, 1, seq, 128]. TFLOP/s count the useful
// (causal: half) flops of the products, 2 in the forward and 5 in the
// backward, as bench/peer/gpu_torch.py does.
struct AttentionOperands {
  Tensor q, kv, out, grad;
};

AttentionOperands MakeAttentionOperands(int64_t seq) {
  const int64_t batch = 4, kv_heads = 8, group = 4, dim = 128;
  const Device gpu = Device::CUDA(0);
  AttentionOperands a;
  a.q = *Tensor::Full({batch, kv_heads, group, seq, dim}, 0.01, DType::kBF16,
                      gpu);
  a.kv = *Tensor::Full({batch, kv_heads, 1, seq, dim}, 0.02, DType::kBF16, gpu);
  a.grad = *Tensor::Full(a.q.shape(), 0.03, DType::kBF16, gpu);
  return a;
}

// `products` causal products' worth of useful flops per iteration.
void SetAttentionTflops(benchmark::State& state, int products) {
  const double seq = static_cast<double>(state.range(0));
  SetTflops(state, products * 2.0 * 4 * 32 * seq * seq * 128 / 2);
}

void BM_AttentionForward(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const AttentionOperands a = MakeAttentionOperands(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(ScaledDotProductAttention(a.q, a.kv, a.kv, true));
    Sync(state);
  }
  SetAttentionTflops(state, 2);
}

// The forward and ScaledDotProductAttentionBackward of its output: what a
// training step runs, and what gpu_torch.py's torch_sdpa_fwd_bwd times.
void BM_AttentionForwardBackward(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const AttentionOperands a = MakeAttentionOperands(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<Tensor> out =
        ScaledDotProductAttention(a.q, a.kv, a.kv, true);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(
        ScaledDotProductAttentionBackward(a.q, a.kv, a.kv, *out, a.grad, true));
    Sync(state);
  }
  SetAttentionTflops(state, 7);
}

// Cross entropy (mean) over bf16 logits [4096, 128256] (batch 4 x seq 1024
// of a Llama-3 vocabulary) on a one-rank mesh: the registry op's forward
// (the loss, the count and the rows' log-sum-exp; two reads of the logits),
// then with arg backward 1 the fused backward op (one read, one write). Bytes
// count those logit passes, so the rate compares with a device copy.
void BM_CrossEntropy(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Device gpu = Device::CUDA(0);
  const DeviceMesh mesh = *DeviceMesh::Create({1});
  bench::RankZero rank(mesh.size());
  const Placement r[] = {Placement::Replicate()};
  const DTensor logits = *DTensor::FromLocal(
      rank.runtime(), *Tensor::Full({4096, 128256}, 0.5, DType::kBF16, gpu),
      mesh, r);
  const DTensor target = *DTensor::FromLocal(
      rank.runtime(), *Tensor::Zeros({4096}, DType::kI64, gpu), mesh, r);
  const DTensor grad = *DTensor::FromLocal(
      rank.runtime(), *Tensor::Scalar(1.0, DType::kBF16).To(gpu), mesh, r);
  const OpDef& op = **OpRegistry::Builtin().Find("cross_entropy");
  const DTensor* in[] = {&logits, &target};
  OpArgs args;
  args.AddInt(static_cast<int64_t>(Reduction::kMean)).AddInt(-100);
  const bool backward = state.range(0) == 1;
  for (auto _ : state) {
    const absl::StatusOr<OpOutputs> out = Dispatch(op, in, args);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      break;
    }
    if (backward) {
      benchmark::DoNotOptimize(ops::CrossEntropyBackward(
          logits, target, (*out)[2], grad, (*out)[1]));
    }
    Sync(state);
  }
  const int64_t passes = backward ? 4 : 2;
  state.SetBytesProcessed(passes * logits.ToLocal().nbytes() *
                          state.iterations());
}

// The embedding's table gradient at Llama-3.2-1B's shape: bf16 grad
// [4096, 2048] (batch 4 x seq 1024) into a [128256, 2048] table, the tokens
// spread over the vocabulary by a fixed hash (repeats included). Bytes count
// the grad read once and the gradient written once, so the rate compares
// with a device copy.
void BM_EmbeddingBackward(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  constexpr int64_t kVocab = 128256;
  constexpr int64_t kWidth = 2048;
  constexpr int64_t kTokens = 4096;
  std::vector<int64_t> tokens(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) {
    tokens[i] = (i * 2654435761LL) % kVocab;
  }
  const Device gpu = Device::CUDA(0);
  const Tensor indices =
      *Tensor::FromVector<int64_t>(tokens, {kTokens})->To(gpu);
  const Tensor grad = *Tensor::Full({kTokens, kWidth}, 0.25, DType::kBF16, gpu);
  for (auto _ : state) {
    benchmark::DoNotOptimize(EmbeddingBackward(indices, grad, kVocab));
    Sync(state);
  }
  state.SetBytesProcessed((kTokens + kVocab) * kWidth * 2 * state.iterations());
}

// The tensor-layer add of a tiny CUDA tensor [1, 8]: allocation and launch,
// the kernel negligible (launches are asynchronous).
void BM_SmallOpDispatch(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const Tensor a = *Tensor::Ones({1, 8}, DType::kF32, Device::CUDA(0));
  for (auto _ : state) benchmark::DoNotOptimize(Add(a, a));
  Sync(state);
}

// The same add through the DTensor layer (rank 0 of 8, [8, 8] sharded
// S(0), so its local block is that [1, 8] CUDA tensor): cached propagation,
// no redistribution. Its time less BM_SmallOpDispatch's is the DTensor
// dispatch overhead.
void BM_DTensorAddDispatch(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  const DeviceMesh mesh = *DeviceMesh::Create({8});
  bench::RankZero rank(mesh.size());
  const DTensor a =
      bench::OnesOfRankZero(rank.runtime(), mesh, "S(0)", Device::CUDA(0));
  if (!ops::Add(a, a).ok()) state.SkipWithError("dispatch failed");
  for (auto _ : state) benchmark::DoNotOptimize(ops::Add(a, a));
  Sync(state);
}

// The parameter shapes of Llama 3.2 1B (nn/configs/1b.json) cut to 2
// layers, in the model's order: the embedding, per layer the attention norm,
// wq, wk, wv, wo, the ffn norm, w1, w2, w3; the norm and the output (21
// parameters, 645M elements).
std::vector<Shape> Llama1BTwoLayerShapes() {
  nn::LlamaConfig config;
  config.dim = 2048;
  config.n_layers = 2;
  config.n_heads = 32;
  config.n_kv_heads = 8;
  config.vocab_size = 128256;
  config.multiple_of = 256;
  config.ffn_dim_multiplier = 1.5;
  const int64_t dim = config.dim, vocab = config.vocab_size;
  const int64_t kv = config.kv_heads() * config.head_dim();
  const int64_t hidden = config.hidden_dim();
  std::vector<Shape> shapes = {{vocab, dim}};
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    for (const Shape& shape : std::vector<Shape>{{dim},
                                                 {dim, dim},
                                                 {kv, dim},
                                                 {kv, dim},
                                                 {dim, dim},
                                                 {dim},
                                                 {hidden, dim},
                                                 {dim, hidden},
                                                 {hidden, dim}}) {
      shapes.push_back(shape);
    }
  }
  shapes.push_back({dim});
  shapes.push_back({vocab, dim});
  return shapes;
}

// One AdamW step over that parameter set in bf16 on the GPU, per parameter
// (arg multi 0: AdamWStep on each, 21 launches, as the optimizer stepped
// before) or multi-tensor (1: one AdamWStepMany, a launch per 320 chunks of
// 64Ki elements). Bytes: p, m, v and g read, p, m and v written.
void BM_AdamWLlama1BTwoLayers(benchmark::State& state) {
  if (SkipWithoutGpu(state)) return;
  std::vector<AdamWOperands> entries;
  int64_t elements = 0;
  for (const Shape& shape : Llama1BTwoLayerShapes()) {
    const Device gpu = Device::CUDA(0);
    entries.push_back({*Tensor::Full(shape, 0.5, DType::kBF16, gpu),
                       *Tensor::Zeros(shape, DType::kBF16, gpu),
                       *Tensor::Zeros(shape, DType::kBF16, gpu),
                       *Tensor::Full(shape, 0.01, DType::kBF16, gpu), 0});
    elements += NumElements(shape);
  }
  const AdamWOptions options;
  const bool multi = state.range(0) == 1;
  for (auto _ : state) {
    absl::Status status;
    for (AdamWOperands& e : entries) ++e.step;
    if (multi) {
      status = AdamWStepMany(entries, options);
    } else {
      for (const AdamWOperands& e : entries) {
        status.Update(AdamWStep(e.param, e.exp_avg, e.exp_avg_sq, e.grad,
                                options, e.step));
      }
    }
    if (!status.ok())
      state.SkipWithError(std::string(status.message()).c_str());
    Sync(state);
  }
  state.SetBytesProcessed(7 * 2 * elements * state.iterations());
}

BENCHMARK(BM_TensorMatmul)->Arg(0)->Arg(1)->ArgName("bf16")->UseRealTime();
BENCHMARK(BM_CublasDirect)->Arg(0)->Arg(1)->ArgName("bf16")->UseRealTime();
BENCHMARK(BM_DeviceCopy)->UseRealTime();
BENCHMARK(BM_Add)->UseRealTime();
BENCHMARK(BM_CastF32ToBf16)->UseRealTime();
BENCHMARK(BM_BroadcastAdd)->UseRealTime();
BENCHMARK(BM_SwiGlu)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"bf16", "fused"})
    ->UseRealTime();
BENCHMARK(BM_SwiGluBackward)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"bf16", "fused"})
    ->UseRealTime();
BENCHMARK(BM_Sum)->UseRealTime();
BENCHMARK(BM_AddRmsNorm)->Arg(0)->Arg(1)->ArgName("fused")->UseRealTime();
BENCHMARK(BM_AddRmsNormBackward)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("fused")
    ->UseRealTime();
BENCHMARK(BM_AttentionForward)->Arg(1024)->Arg(2048)->UseRealTime();
BENCHMARK(BM_AttentionForwardBackward)->Arg(1024)->Arg(2048)->UseRealTime();
BENCHMARK(BM_AdamWLlama1BTwoLayers)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("multi")
    ->UseRealTime();
BENCHMARK(BM_CrossEntropy)->Arg(0)->Arg(1)->ArgName("backward")->UseRealTime();
BENCHMARK(BM_EmbeddingBackward)->UseRealTime();
BENCHMARK(BM_SmallOpDispatch);
BENCHMARK(BM_DTensorAddDispatch);

}  // namespace
}  // namespace dtensor
