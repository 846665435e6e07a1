// The CPU kernels of a training step that issue 13 made faster, each next to
// what it replaced (docs/performance.md, "CPU kernels"):
//  - exp: the vectorized FastExp loop (dtensor/tensor/vector_exp.h) vs std::exp
//  per
//    element (what softmax, SiLU and cross entropy called before), and the
//    ops built on it (Exp, Silu, Softmax) at the tiny Llama's shapes;
//  - broadcasting Mul, row ([n, d] * [d]) and column ([n, d] * [n, 1]), vs the
//    same-shape Mul, at the model's widths and at a RoPE-like inner dim of 16;
//  - log: the Log op (the vectorized FastLog, dtensor/tensor/cuda/fast_log.h)
//  vs
//    std::log per element;
//  - SiLU's backward: the fused silu_backward pass vs the six elementwise
//    ops it replaced;
//  - embedding's table gradient: the scatter-add vs the one-hot product;
//  - AdamW: the fused one-pass kernel (dtensor/tensor/adamw_kernel.h) vs the
//  same step
//    as elementwise ops (the unfused formula, each op a pass and a temporary);
//  - attention: the tiled forward and backward (dtensor/tensor/attention.h)
//    vs the same math through materialized [seq, seq] scores.
// Elements per second count the elements of the output (of the parameter for
// AdamW).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "benchmark/benchmark.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/tensor/vector_exp.h"

namespace dtensor {
namespace {

Tensor Random(const Shape& shape, uint64_t seed, double low = -1,
              double high = 1) {
  Generator generator(seed);
  return Tensor::Uniform(shape, low, high, generator).value();
}

void SetElements(benchmark::State& state, int64_t n) {
  state.SetItemsProcessed(state.iterations() * n);
}

// ---- exp. ----

// Softmax-like inputs: x - max in [-20, 0].
std::vector<float> ExpInputs(int64_t n) {
  return Random({n}, 1, -20, 0).ToVector<float>().value();
}

// `fn` (a libm function) element by element over `in`.
template <typename Fn>
void RunLibmLoop(benchmark::State& state, const std::vector<float>& in, Fn fn) {
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<float> out(n);
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) out[i] = fn(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetElements(state, n);
}

void BM_ExpLoopLibm(benchmark::State& state) {
  RunLibmLoop(state, ExpInputs(state.range(0)),
              [](float x) { return std::exp(x); });
}

void BM_ExpLoopFast(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> in = ExpInputs(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    ExpShifted(in.data(), out.data(), n, 0.0f);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetElements(state, n);
}

BENCHMARK(BM_ExpLoopLibm)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_ExpLoopFast)->Arg(4096)->Arg(1 << 20);

// ---- log. ----

// Positive inputs over many binades: (0, 20].
std::vector<float> LogInputs(int64_t n) {
  return Random({n}, 3, 1e-6, 20).ToVector<float>().value();
}

void BM_LogLoopLibm(benchmark::State& state) {
  RunLibmLoop(state, LogInputs(state.range(0)),
              [](float x) { return std::log(x); });
}
// The Log op: FastLog in the op's blocked loop (what GCC vectorizes at -O2,
// dtensor/tensor/blocked_loop.h), its output allocated as the API does.
void BM_LogOp(benchmark::State& state) {
  const Tensor x =
      *Tensor::FromVector(LogInputs(state.range(0)), {state.range(0)});
  benchmark::DoNotOptimize(Log(x)->raw_data());
  for (auto _ : state) {
    Tensor y = *Log(x);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  SetElements(state, x.numel());
}

BENCHMARK(BM_LogLoopLibm)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_LogOp)->Arg(4096)->Arg(1 << 20);

// An op on one input of `shape`, its result allocated as the API does (one
// untimed call first: the steady state of a training loop).
template <typename Op>
void RunUnary(benchmark::State& state, const Shape& shape, Op op) {
  const Tensor x = Random(shape, 2, -4, 4);
  benchmark::DoNotOptimize(op(x).raw_data());
  for (auto _ : state) {
    Tensor y = op(x);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  SetElements(state, x.numel());
}

// The SiLU of the tiny Llama's feed forward: [batch x seq, hidden].
void BM_Silu(benchmark::State& state) {
  RunUnary(state, {512, 704}, [](const Tensor& x) { return *Silu(x); });
}
// Softmax over the last dim: attention rows [b x heads x seq, seq] and the
// loss's rows [batch x seq, vocab].
void BM_Softmax(benchmark::State& state) {
  RunUnary(state, {state.range(0), state.range(1)},
           [](const Tensor& x) { return *Softmax(x, -1); });
}
BENCHMARK(BM_Silu);

// SiLU's backward at the feed forward's shape: one fused pass, and the six
// elementwise ops (sigmoid, 1 - s, * x, + 1, * s, * g) it replaced.
void BM_SiluBackwardFused(benchmark::State& state) {
  const Tensor g = Random({512, 704}, 4);
  RunUnary(state, {512, 704},
           [&g](const Tensor& x) { return *SiluBackward(g, x); });
}
void BM_SiluBackwardUnfused(benchmark::State& state) {
  const Tensor g = Random({512, 704}, 4);
  RunUnary(state, {512, 704}, [&g](const Tensor& x) {
    const Tensor s = *Sigmoid(x);
    Tensor d = *Sub(Tensor::Scalar(1.0, DType::kF32), s);
    d = *Mul(d, x);
    d = *Add(d, 1.0);
    d = *Mul(d, s);
    return *Mul(g, d);
  });
}
BENCHMARK(BM_SiluBackwardFused);
BENCHMARK(BM_SiluBackwardUnfused);
BENCHMARK(BM_Softmax)->Args({4096, 64})->Args({512, 256});

// ---- Embedding's table gradient. ----

// 512 tokens of width 256 into a table of range(0) rows: the scatter-add
// (EmbeddingBackward) and the one-hot matrix product it replaced (the one-hot
// [rows, tokens] built outside the timed loop, so only the product is
// timed). Items: the table's elements.
void BM_EmbeddingBackwardScatter(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const Tensor indices =
      *Tensor::FromVector(Random({512}, 5, 0, static_cast<double>(rows - 1))
                              .ToVector<int64_t>()
                              .value(),
                          {512});
  const Tensor grad = Random({512, 256}, 6);
  for (auto _ : state) {
    Tensor dtable = *EmbeddingBackward(indices, grad, rows);
    benchmark::DoNotOptimize(dtable.raw_data());
  }
  SetElements(state, rows * 256);
}
void BM_EmbeddingBackwardOneHot(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const std::vector<int64_t> indices =
      Random({512}, 5, 0, static_cast<double>(rows - 1))
          .ToVector<int64_t>()
          .value();
  std::vector<float> hits(rows * 512, 0.0f);
  for (int64_t t = 0; t < 512; ++t) hits[indices[t] * 512 + t] = 1.0f;
  const Tensor onehot_t = *Tensor::FromVector(hits, {rows, 512});
  const Tensor grad = Random({512, 256}, 6);
  for (auto _ : state) {
    Tensor dtable = *Matmul(onehot_t, grad);
    benchmark::DoNotOptimize(dtable.raw_data());
  }
  SetElements(state, rows * 256);
}
BENCHMARK(BM_EmbeddingBackwardScatter)->Arg(256)->Arg(32000);
BENCHMARK(BM_EmbeddingBackwardOneHot)->Arg(256)->Arg(32000);

// ---- Broadcasting Mul. ----

// [rows, width] * rhs of `rhs_shape`.
void RunMul(benchmark::State& state, const Shape& rhs_shape) {
  const int64_t rows = state.range(0), width = state.range(1);
  const Tensor a = Random({rows, width}, 3);
  const Tensor b = Random(rhs_shape, 4);
  benchmark::DoNotOptimize(Mul(a, b)->raw_data());
  for (auto _ : state) {
    Tensor c = *Mul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  SetElements(state, rows * width);
}

void BM_MulSameShape(benchmark::State& state) {
  RunMul(state, {state.range(0), state.range(1)});
}
void BM_MulRowBroadcast(benchmark::State& state) {
  RunMul(state, {state.range(1)});
}
void BM_MulColumnBroadcast(benchmark::State& state) {
  RunMul(state, {state.range(0), 1});
}
// [batch x seq, dim] (RMSNorm's weight and scale) and [batch x seq x heads,
// 16] (RoPE's half head dim).
#define DT_MUL_SHAPES ->Args({512, 256})->Args({4096, 16})
BENCHMARK(BM_MulSameShape) DT_MUL_SHAPES;
BENCHMARK(BM_MulRowBroadcast) DT_MUL_SHAPES;
BENCHMARK(BM_MulColumnBroadcast) DT_MUL_SHAPES;
#undef DT_MUL_SHAPES

// ---- AdamW. ----

struct AdamWTensors {
  Tensor p, m, v, g;
};

AdamWTensors MakeAdamW(int64_t n) {
  return {Random({n}, 5), *Tensor::Zeros({n}, DType::kF32),
          *Tensor::Zeros({n}, DType::kF32), Random({n}, 6)};
}

constexpr AdamWOptions kArgs{1e-3, 0.9, 0.999, 1e-8, 1e-2};

void BM_AdamWFused(benchmark::State& state) {
  AdamWTensors t = MakeAdamW(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        AdamWStep(t.p, t.m, t.v, t.g, kArgs, /*step=*/1).ok());
    benchmark::ClobberMemory();
  }
  SetElements(state, state.range(0));
}

// The step as elementwise ops, as nn::AdamW ran it before the fused kernel.
void BM_AdamWUnfused(benchmark::State& state) {
  AdamWTensors t = MakeAdamW(state.range(0));
  const double lr = kArgs.learning_rate, b1 = kArgs.beta1, b2 = kArgs.beta2;
  const double step = 1;
  for (auto _ : state) {
    Tensor m = *Add(*Mul(t.m, b1), *Mul(t.g, 1 - b1));
    (void)t.m.CopyFrom(m);
    Tensor v = *Add(*Mul(t.v, b2), *Mul(*Mul(t.g, t.g), 1 - b2));
    (void)t.v.CopyFrom(v);
    Tensor denom =
        *Add(*Div(*Sqrt(t.v), std::sqrt(1 - std::pow(b2, step))), kArgs.eps);
    Tensor update = *Mul(*Div(t.m, denom), lr / (1 - std::pow(b1, step)));
    (void)t.p.CopyFrom(*Sub(*Mul(t.p, 1 - lr * kArgs.weight_decay), update));
    benchmark::ClobberMemory();
  }
  SetElements(state, state.range(0));
}

// The tiny Llama's largest parameter (256 x 704) and 1M elements.
BENCHMARK(BM_AdamWFused)->Arg(180224)->Arg(1 << 20);
BENCHMARK(BM_AdamWUnfused)->Arg(180224)->Arg(1 << 20);

// ---- Attention. ----

// Causal grouped-query attention in f32: 8 query heads over 4 kv heads of
// dim 64 (q [1, 4, 2, seq, 64], k and v [1, 4, 1, seq, 64]), seq range(0);
// out and grad_out for the backward.
struct AttentionInputs {
  Tensor q, k, v, out, grad;
};
AttentionInputs MakeAttentionInputs(int64_t seq) {
  AttentionInputs in;
  in.q = Random({1, 4, 2, seq, 64}, 7);
  in.k = Random({1, 4, 1, seq, 64}, 8);
  in.v = Random({1, 4, 1, seq, 64}, 9);
  in.out = *ScaledDotProductAttention(in.q, in.k, in.v, /*causal=*/true);
  in.grad = Random({1, 4, 2, seq, 64}, 10);
  return in;
}

// Items: the useful flops of the products (2 seq^2 64 each, causal: half of
// them), 2 products in the forward and 5 in the backward (as
// bench/gpu_bench.cc and bench/peer/gpu_torch.py count them).
void SetAttentionFlops(benchmark::State& state, int products) {
  const double seq = static_cast<double>(state.range(0));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * products *
                                               2.0 * 8 * seq * seq * 64 / 2));
}

// The causal attention weights [1, 4, 2, seq, seq] as the materializing
// path computes them: q k^T scaled, masked to -inf, softmax.
Tensor MaterializedWeights(const AttentionInputs& in) {
  const int64_t seq = in.q.size(-2);
  Tensor visible = *Tensor::Empty({seq, seq}, DType::kBool);
  for (int64_t i = 0; i < seq; ++i) {
    for (int64_t j = 0; j < seq; ++j)
      visible.data<bool>()[i * seq + j] = j <= i;
  }
  const Tensor scores = *Mul(*Matmul(in.q, *in.k.Transpose(-2, -1)), 0.125);
  const Tensor hidden =
      Tensor::Scalar(-std::numeric_limits<double>::infinity(), DType::kF32);
  return *Softmax(*Where(visible, scores, hidden), -1);
}

void BM_AttentionForward(benchmark::State& state) {
  const AttentionInputs in = MakeAttentionInputs(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        ScaledDotProductAttention(in.q, in.k, in.v, /*causal=*/true));
  }
  SetAttentionFlops(state, 2);
}

void BM_AttentionForwardMaterialized(benchmark::State& state) {
  const AttentionInputs in = MakeAttentionInputs(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Matmul(MaterializedWeights(in), in.v));
  }
  SetAttentionFlops(state, 2);
}

void BM_AttentionBackward(benchmark::State& state) {
  const AttentionInputs in = MakeAttentionInputs(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(ScaledDotProductAttentionBackward(
        in.q, in.k, in.v, in.out, in.grad, /*causal=*/true));
  }
  SetAttentionFlops(state, 5);
}

// The composition scaled_dot_product_attention's backward ran before the
// fused op: dv = p^T g, ds = p (g v^T - sum(g v^T p)) scale, dq = ds k,
// dk = ds^T q, dk and dv summed over the query group.
void BM_AttentionBackwardMaterialized(benchmark::State& state) {
  const AttentionInputs in = MakeAttentionInputs(state.range(0));
  const int64_t last[] = {-1};
  const int64_t group[] = {2};
  for (auto _ : state) {
    const Tensor p = MaterializedWeights(in);
    const Tensor dv = *Sum(*Matmul(*p.Transpose(-2, -1), in.grad), group, true);
    const Tensor dp = *Matmul(in.grad, *in.v.Transpose(-2, -1));
    const Tensor total = *Sum(*Mul(dp, p), last, /*keepdim=*/true);
    const Tensor ds = *Mul(*Mul(*Sub(dp, total), p), 0.125);
    const Tensor dq = *Matmul(ds, in.k);
    const Tensor dk =
        *Sum(*Matmul(*ds.Transpose(-2, -1), in.q), group, /*keepdim=*/true);
    benchmark::DoNotOptimize(dq.raw_data());
    benchmark::DoNotOptimize(dk.raw_data());
    benchmark::DoNotOptimize(dv.raw_data());
  }
  SetAttentionFlops(state, 5);
}

BENCHMARK(BM_AttentionForward)->Arg(256)->Arg(1024)->Arg(2048);
BENCHMARK(BM_AttentionForwardMaterialized)->Arg(256)->Arg(1024)->Arg(2048);
BENCHMARK(BM_AttentionBackward)->Arg(256)->Arg(1024)->Arg(2048);
BENCHMARK(BM_AttentionBackwardMaterialized)->Arg(256)->Arg(1024)->Arg(2048);

}  // namespace
}  // namespace dtensor
