// The tensor-core attention (dtensor/tensor/cuda/attention_mma_kernels.h) on
// a CUDA device against the float64 reference (reference_attention.h): its
// forward (out and the log-sum-exps) and backward (dq, dk, dv) launched
// directly, and the public ScaledDotProductAttention and its backward, which
// dispatch bf16/f16 with head dims multiple of 16 to it. bf16 and f16, causal
// and not, grouped-query heads (4 query heads over 2 kv heads), head dims 16,
// 64, 80 (the kernels for 128, columns past 80 zero) and 128, lengths off
// the tiles (1, 37, 130, 200, 257, 300: the backward's causal steps both on
// and off the diagonal, several steps through both of its buffers) and
// lq != lk (causal rows that see no key included); the forward also without
// out (the log-sum-exps alone). Needs a GPU (tag `gpu`); skips otherwise.
//
// Tolerances, against the reference of the same rounded inputs: the results
// within a fraction of their largest magnitude, 3e-2 for bf16 and 1e-2 for
// f16 (the kernels round the weights P and their gradients dS to the input
// type before the products, 8 and 11 significant bits); the log-sum-exps
// (f32 throughout) within 2e-3 + 1e-3 |lse|.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/attention_case.h"
#include "tests/tensor/reference_attention.h"

#ifdef DTENSOR_CUDA
#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#endif

namespace dtensor {
namespace {

using testing::kGpu;
using testing::OnGpu;
using Case = testing::AttentionCase;
using Operands = testing::AttentionOperands;

std::vector<Case> Cases() {
  return testing::TensorCoreAttentionCases({{1, 1},
                                            {37, 37},
                                            {130, 257},
                                            {257, 130},
                                            {37, 1},
                                            {200, 200},
                                            {300, 300}});
}

// The relative tolerance of a case's results (header comment).
double ResultTolerance(DType dtype) {
  return dtype == DType::kBF16 ? 3e-2 : 1e-2;
}

std::vector<double> HostValues(const Tensor& t) {
  return t.To(Device::CPU())->To(DType::kF64)->ToVector<double>().value();
}

// Every |actual - expected| within ResultTolerance of the largest |expected|
// (at least 1e-3 of an absolute bound).
void ExpectNear(const Tensor& actual, const std::vector<double>& expected,
                DType dtype, const std::string& what) {
  const std::vector<double> got = HostValues(actual);
  ASSERT_EQ(got.size(), expected.size()) << what;
  double largest = 1e-3;
  for (const double x : expected) largest = std::max(largest, std::abs(x));
  const double bound = ResultTolerance(dtype) * largest;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::abs(got[i] - expected[i]) <= bound;
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs "
                    << expected[i] << " (bound " << bound << ")";
    }
  }
}

void ExpectLse(const Tensor& lse, const std::vector<double>& expected,
               const std::string& what) {
  const std::vector<double> got = HostValues(lse);
  ASSERT_EQ(got.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isinf(expected[i])
                        ? got[i] == expected[i]
                        : std::abs(got[i] - expected[i]) <=
                              2e-3 + 1e-3 * std::abs(expected[i]);
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << " lse [" << i << "]: " << got[i] << " vs "
                    << expected[i];
    }
  }
}

// A drawn case: its host operands, the float64 reference computed from them,
// and the operands copied to the GPU.
struct DrawnOnGpu {
  Operands host;
  testing::AttentionReference ref;
  Tensor q, k, v, dout;
};

DrawnOnGpu DrawOnGpu(const Case& c, std::mt19937& rng) {
  DrawnOnGpu d{testing::DrawAttentionOperands(c, rng)};
  const Operands& o = d.host;
  d.ref =
      testing::ReferenceAttention(o.q, o.k, o.v, o.dout, c.causal, c.Scale());
  d.q = OnGpu(o.q);
  d.k = OnGpu(o.k);
  d.v = OnGpu(o.v);
  d.dout = OnGpu(o.dout);
  return d;
}

// The public entry points on the GPU: they take the tensor-core path for
// these dtypes and head dims.
TEST(AttentionCudaTest, PublicForwardAndBackwardMatchTheReference) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (const Case& c : Cases()) {
    const DrawnOnGpu d = DrawOnGpu(c, rng);
    const testing::AttentionReference& ref = d.ref;
    const absl::StatusOr<Tensor> out =
        ScaledDotProductAttention(d.q, d.k, d.v, c.causal, c.Scale());
    ASSERT_TRUE(out.ok()) << c.Name() << ": " << out.status();
    ExpectNear(*out, ref.out, c.dtype, c.Name() + " out");
    const absl::StatusOr<AttentionGrads> grads =
        ScaledDotProductAttentionBackward(d.q, d.k, d.v, *out, d.dout, c.causal,
                                          c.Scale());
    ASSERT_TRUE(grads.ok()) << c.Name() << ": " << grads.status();
    ExpectNear(grads->dq, ref.dq, c.dtype, c.Name() + " dq");
    ExpectNear(grads->dk, ref.dk, c.dtype, c.Name() + " dk");
    ExpectNear(grads->dv, ref.dv, c.dtype, c.Name() + " dv");
  }
}

#ifdef DTENSOR_CUDA
// The launch of a case: batch [kv heads, group], k and v at stride 0 over
// the group.
cuda::AttentionLaunch LaunchOf(const Case& c) {
  cuda::AttentionLaunch a;
  a.entries = testing::kAttentionEntries;
  a.batch.ndim = 2;
  a.batch.sizes[0] = testing::kAttentionKvHeads;
  a.batch.sizes[1] = testing::kAttentionGroup;
  a.batch.strides[0][0] = testing::kAttentionGroup * c.lq * c.e;
  a.batch.strides[0][1] = c.lq * c.e;
  for (int operand = 1; operand < 3; ++operand) {
    a.batch.strides[operand][0] = c.lk * c.e;
    a.batch.strides[operand][1] = 0;
  }
  a.lq = c.lq;
  a.lk = c.lk;
  a.e = a.ev = c.e;
  a.causal = c.causal;
  a.scale = c.Scale();
  return a;
}

// The kernels launched directly: out and lse of the forward, and with
// delta = rowsum(dout * out) the f32 gradients of the backward.
TEST(AttentionCudaTest, MmaKernelsMatchTheReference) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  for (const Case& c : Cases()) {
    const DrawnOnGpu d = DrawOnGpu(c, rng);
    const Operands& o = d.host;
    const testing::AttentionReference& ref = d.ref;
    const Tensor &q = d.q, &k = d.k, &v = d.v, &dout = d.dout;
    const cuda::AttentionLaunch a = LaunchOf(c);
    const cuda::ScalarType type = cuda::ToScalarType(c.dtype);
    Tensor out = *Tensor::Empty(o.q.shape(), c.dtype, kGpu);
    Tensor lse = *Tensor::Empty({a.entries * c.lq}, DType::kF32, kGpu);
    ASSERT_TRUE(cuda::AttentionMmaSupports(type, a, q.raw_data(), k.raw_data(),
                                           v.raw_data(), out.raw_data()))
        << c.Name();
    ASSERT_TRUE(cuda::LaunchOn(q, "forward",
                               [&](cudaStream_t stream) {
                                 return cuda::LaunchAttentionMmaForward(
                                     type, a, q.raw_data(), k.raw_data(),
                                     v.raw_data(), out.raw_data(),
                                     static_cast<float*>(lse.raw_data()),
                                     stream);
                               })
                    .ok())
        << c.Name();
    ExpectNear(out, ref.out, c.dtype, c.Name() + " mma out");
    ExpectLse(lse, ref.lse, c.Name());
    // The log-sum-exps alone (no out), as the backward computes them.
    Tensor lse_alone = *Tensor::Empty({a.entries * c.lq}, DType::kF32, kGpu);
    ASSERT_TRUE(cuda::LaunchOn(q, "lse alone",
                               [&](cudaStream_t stream) {
                                 return cuda::LaunchAttentionMmaForward(
                                     type, a, q.raw_data(), k.raw_data(),
                                     v.raw_data(), nullptr,
                                     static_cast<float*>(lse_alone.raw_data()),
                                     stream);
                               })
                    .ok())
        << c.Name();
    ExpectLse(lse_alone, ref.lse, c.Name() + " (lse alone)");
    // delta from the kernel's own (rounded) out, as the entry point does.
    const std::vector<double> out_values = HostValues(out);
    const std::vector<double> dout_values = HostValues(o.dout);
    std::vector<float> delta_values(a.entries * c.lq, 0.0f);
    for (size_t x = 0; x < out_values.size(); ++x) {
      delta_values[x / c.e] += out_values[x] * dout_values[x];
    }
    const Tensor delta =
        *Tensor::FromVector<float>(delta_values, {a.entries * c.lq})->To(kGpu);
    Tensor dq = *Tensor::Zeros(o.q.shape(), DType::kF32, kGpu);
    Tensor dk = *Tensor::Zeros(o.k.shape(), DType::kF32, kGpu);
    Tensor dv = *Tensor::Zeros(o.v.shape(), DType::kF32, kGpu);
    ASSERT_TRUE(
        cuda::LaunchOn(q, "backward",
                       [&](cudaStream_t stream) {
                         return cuda::LaunchAttentionMmaBackward(
                             type, a, q.raw_data(), k.raw_data(), v.raw_data(),
                             dout.raw_data(),
                             static_cast<const float*>(lse.raw_data()),
                             static_cast<const float*>(delta.raw_data()),
                             static_cast<float*>(dq.raw_data()),
                             static_cast<float*>(dk.raw_data()),
                             static_cast<float*>(dv.raw_data()), stream);
                       })
            .ok())
        << c.Name();
    ExpectNear(dq, ref.dq, c.dtype, c.Name() + " mma dq");
    ExpectNear(dk, ref.dk, c.dtype, c.Name() + " mma dk");
    ExpectNear(dv, ref.dv, c.dtype, c.Name() + " mma dv");
  }
}
#endif

}  // namespace
}  // namespace dtensor
