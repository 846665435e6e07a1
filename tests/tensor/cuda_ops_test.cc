// The tensor kernels on a CUDA device against the CPU kernels, on random
// shapes, dtypes and layouts. Needs a GPU (tag `gpu`); skips with a message
// otherwise.
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/cuda/random_body.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/indexing.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/nn_functional_cuda.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::kGpu;
using testing::Layout;
using testing::OnGpu;
using testing::RandomIndices;
using testing::RandomTensor;

// Expects the device result to match the CPU one within `scale` times the
// dtype's tolerance.
void ExpectMatches(const absl::StatusOr<Tensor>& gpu,
                   const absl::StatusOr<Tensor>& cpu, const std::string& what,
                   double scale = 4) {
  ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
  ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
  ASSERT_TRUE(gpu->device().is_cuda()) << what;
  ASSERT_EQ(gpu->dtype(), cpu->dtype()) << what;
  const Tensor back = *gpu->To(Device::CPU());
  ASSERT_EQ(back.shape(), cpu->shape()) << what;
  const auto tolerance = testing::ToleranceFor(cpu->dtype());
  EXPECT_TRUE(AllClose(*back.To(DType::kF64), *cpu->To(DType::kF64),
                       scale * tolerance.rtol, scale * tolerance.atol))
      << what << "\n device: " << back << "\n cpu: " << *cpu;
}

TEST(CudaOpsTest, ElementwiseWithBroadcastingAndStrides) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  using BinaryFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<std::string, BinaryFn>> ops = {
      {"Add", Add}, {"Sub", Sub},         {"Mul", Mul},
      {"Div", Div}, {"Maximum", Maximum}, {"Lt", Lt}};
  for (int trial = 0; trial < 40; ++trial) {
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const int64_t rows = std::uniform_int_distribution<int64_t>(1, 70)(rng);
    const int64_t cols = std::uniform_int_distribution<int64_t>(1, 90)(rng);
    const Layout layout = testing::Pick(
        std::vector<Layout>{Layout::kContiguous, Layout::kTransposed,
                            Layout::kStrided},
        rng);
    const Tensor a = RandomTensor({rows, cols}, dtype, layout, rng, 0.5, 2);
    const std::vector<Shape> b_shapes = {{rows, cols}, {cols}, {rows, 1}, {}};
    const Tensor b = RandomTensor(testing::Pick(b_shapes, rng), dtype,
                                  Layout::kContiguous, rng, 0.5, 2);
    for (const auto& [name, fn] : ops) {
      ExpectMatches(fn(OnGpu(a), OnGpu(b)), fn(a, b),
                    absl::StrCat(name, " ", std::string(DTypeName(dtype)), " ",
                                 ShapeToString(a.shape()), " ",
                                 ShapeToString(b.shape())));
    }
    ExpectMatches(Silu(OnGpu(a)), Silu(a), "Silu");
    ExpectMatches(Exp(OnGpu(a)), Exp(a), "Exp");
    ExpectMatches(Mul(OnGpu(a), 3.0), Mul(a, 3.0), "Mul scalar");
    ExpectMatches(OnGpu(a).To(DType::kF32), a.To(DType::kF32), "cast");
  }
}

TEST(CudaOpsTest, MatmulOnCublas) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (int trial = 0; trial < 30; ++trial) {
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const int64_t m = std::uniform_int_distribution<int64_t>(1, 65)(rng);
    const int64_t k = std::uniform_int_distribution<int64_t>(1, 65)(rng);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 65)(rng);
    const std::vector<Layout> layouts = {Layout::kContiguous,
                                         Layout::kTransposed};
    const Shape a_shape = trial % 3 == 0 ? Shape{3, m, k} : Shape{m, k};
    const Shape b_shape = trial % 2 == 0 ? Shape{3, k, n} : Shape{k, n};
    const Tensor a =
        RandomTensor(a_shape, dtype, testing::Pick(layouts, rng), rng);
    const Tensor b =
        RandomTensor(b_shape, dtype, testing::Pick(layouts, rng), rng);
    // The sum of k products: tolerance grows with sqrt(k).
    ExpectMatches(
        Matmul(OnGpu(a), OnGpu(b)), Matmul(a, b),
        absl::StrCat("Matmul ", std::string(DTypeName(dtype)), " ",
                     ShapeToString(a_shape), " x ", ShapeToString(b_shape)),
        4 * std::sqrt(static_cast<double>(k)));
  }
}

TEST(CudaOpsTest, RowKernels) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (DType dtype : testing::kFloatDTypes) {
    const Tensor x =
        RandomTensor({4, 37, 300}, dtype, Layout::kContiguous, rng, -3, 3);
    for (int64_t dim : {0, 1, 2}) {
      ExpectMatches(Softmax(OnGpu(x), dim), Softmax(x, dim), "Softmax");
      ExpectMatches(LogSoftmax(OnGpu(x), dim), LogSoftmax(x, dim),
                    "LogSoftmax");
      ExpectMatches(Sum(OnGpu(x), {dim}), Sum(x, {dim}), "Sum", 16);
      ExpectMatches(Mean(OnGpu(x), {dim}, true), Mean(x, {dim}, true), "Mean");
      ExpectMatches(Max(OnGpu(x), {dim}), Max(x, {dim}), "Max");
      ExpectMatches(Min(OnGpu(x), {dim}), Min(x, {dim}), "Min");
      ExpectMatches(SumOfSquares(OnGpu(x), {dim}, true),
                    SumOfSquares(x, {dim}, true), "SumOfSquares", 16);
    }
    ExpectMatches(Sum(OnGpu(x)), Sum(x), "Sum all", 64);
    ExpectMatches(SumOfSquares(OnGpu(x)), SumOfSquares(x), "SumOfSquares all",
                  64);
    const Tensor w = RandomTensor({300}, dtype, Layout::kContiguous, rng);
    ExpectMatches(RmsNorm(OnGpu(x), OnGpu(w), 1e-5), RmsNorm(x, w, 1e-5),
                  "RmsNorm");
    const Tensor bias = RandomTensor({300}, dtype, Layout::kContiguous, rng);
    ExpectMatches(LayerNorm(OnGpu(x), OnGpu(w), OnGpu(bias), 1e-5),
                  LayerNorm(x, w, bias, 1e-5), "LayerNorm");
    ExpectMatches(LayerNorm(OnGpu(x), Tensor(), Tensor(), 1e-5),
                  LayerNorm(x, Tensor(), Tensor(), 1e-5), "LayerNorm plain");
    const Tensor strided =
        RandomTensor({37, 300}, dtype, Layout::kTransposed, rng, 1, 5);
    ExpectMatches(LayerNorm(OnGpu(strided), OnGpu(w), OnGpu(bias), 1e-5),
                  LayerNorm(strided, w, bias, 1e-5), "LayerNorm strided");
    const Tensor table =
        RandomTensor({50, 24}, dtype, Layout::kContiguous, rng);
    const Tensor indices = RandomIndices({3, 7}, 50, DType::kI64, rng);
    ExpectMatches(Embedding(OnGpu(indices), OnGpu(table)),
                  Embedding(indices, table), "Embedding", 0);
    // 200 indices over 50 rows: repeated rows; the block [10, 40): rows
    // outside it skipped. The sorted segments add in the CPU's order.
    const Tensor many = RandomIndices({5, 40}, 50, DType::kI64, rng);
    const Tensor grad =
        RandomTensor({5, 40, 24}, dtype, Layout::kTransposed, rng);
    ExpectMatches(EmbeddingBackward(OnGpu(many), OnGpu(grad), 50, 10, 30),
                  EmbeddingBackward(many, grad, 50, 10, 30),
                  "EmbeddingBackward", 0);
    ExpectMatches(EmbeddingBackward(many, OnGpu(grad), 50),
                  EmbeddingBackward(many, grad, 50),
                  "EmbeddingBackward host indices", 0);
    const Tensor logits =
        RandomTensor({13, 301}, dtype, Layout::kContiguous, rng, -4, 4);
    const Tensor target = RandomIndices({13}, 301, DType::kI64, rng);
    for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      ExpectMatches(CrossEntropy(OnGpu(logits), OnGpu(target), r),
                    CrossEntropy(logits, target, r), "CrossEntropy");
    }
  }
}

TEST(CudaOpsTest, FillEveryDTypeAndLayout) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const std::vector<DType> dtypes = {DType::kF32, DType::kF64, DType::kBF16,
                                     DType::kF16, DType::kI32, DType::kI64,
                                     DType::kBool};
  for (DType dtype : dtypes) {
    const std::string name(DTypeName(dtype));
    ExpectMatches(Tensor::Full({3, 5}, -2.5, dtype, kGpu),
                  Tensor::Full({3, 5}, -2.5, dtype), "Full " + name, 0);
    // A transposed view: filled through its strides, the rest untouched.
    const Tensor cpu = *Tensor::Zeros({4, 6}, dtype);
    const Tensor gpu = OnGpu(cpu);
    Tensor cpu_view = *cpu.Narrow(1, 1, 3)->Transpose(0, 1);
    Tensor gpu_view = *gpu.Narrow(1, 1, 3)->Transpose(0, 1);
    ASSERT_TRUE(cpu_view.Fill(7).ok());
    ASSERT_TRUE(gpu_view.Fill(7).ok());
    ExpectMatches(gpu, cpu, "Fill of a strided view " + name, 0);
  }
}

TEST(CudaOpsTest, WhereBroadcastsAndMixesDevices) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64}) {
    const Tensor a = RandomTensor({5, 7}, dtype, Layout::kTransposed, rng);
    const Tensor b = RandomTensor({7}, dtype, Layout::kContiguous, rng);
    const Tensor cond =
        *Gt(RandomTensor({5, 1}, DType::kF32, Layout::kContiguous, rng, -1, 1),
            0.0);
    ExpectMatches(Where(OnGpu(cond), OnGpu(a), OnGpu(b)), Where(cond, a, b),
                  "Where", 0);
    // A CPU scalar operand is copied to the device of the others.
    const Tensor zero = Tensor::Scalar(0, dtype);
    ExpectMatches(Where(OnGpu(cond), OnGpu(a), zero), Where(cond, a, zero),
                  "Where with a CPU scalar", 0);
  }
}

TEST(CudaOpsTest, AttentionAndRotary) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  for (DType dtype : testing::kFloatDTypes) {
    const std::string name(DTypeName(dtype));
    for (bool causal : {false, true}) {
      // Grouped-query shapes: k and v broadcast over the group dim; more
      // keys than queries (the causal diagonal moves).
      const Tensor q =
          RandomTensor({2, 3, 2, 9, 16}, dtype, Layout::kContiguous, rng);
      const Tensor k =
          RandomTensor({2, 3, 1, 12, 16}, dtype, Layout::kContiguous, rng);
      const Tensor v =
          RandomTensor({2, 3, 1, 12, 16}, dtype, Layout::kContiguous, rng);
      ExpectMatches(
          ScaledDotProductAttention(OnGpu(q), OnGpu(k), OnGpu(v), causal, 0),
          ScaledDotProductAttention(q, k, v, causal, 0),
          absl::StrCat("ScaledDotProductAttention ", name,
                       causal ? " causal" : ""),
          8);
    }
    const Tensor x = RandomTensor({2, 11, 4, 10}, dtype, Layout::kStrided, rng);
    const Tensor positions = RandomIndices({11}, 100, DType::kI64, rng);
    ExpectMatches(RotaryEmbedding(OnGpu(x), Tensor(), 10000),
                  RotaryEmbedding(x, Tensor(), 10000), "Rotary " + name);
    ExpectMatches(RotaryEmbedding(OnGpu(x), OnGpu(positions), 500000),
                  RotaryEmbedding(x, positions, 500000),
                  "Rotary with positions " + name);
    ExpectMatches(RotaryEmbeddingFrom(OnGpu(x), 3, 10000, /*inverse=*/true),
                  RotaryEmbeddingFrom(x, 3, 10000, /*inverse=*/true),
                  "Rotary from position 3, inverse " + name);
  }
}

// The tiled attention (dtensor/tensor/attention.h) forward and backward:
// grouped-query batches, lengths across the device's tiles (64 queries and
// keys for f32, 32 for f64) and not multiples of them, either the longer,
// E != Ev, and head dims too large for the kernels' shared memory (the
// fallbacks: cuBLAS around materialized scores, the host). The backward gets
// the CPU's output on both, so that only the gradient math differs.
TEST(CudaOpsTest, TiledAttentionForwardAndBackward) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  struct Case {
    Shape q, k, v;
    bool causal;
  };
  const std::vector<Case> cases = {
      {{2, 3, 2, 130, 16}, {2, 3, 1, 97, 16}, {2, 3, 1, 97, 40}, true},
      {{2, 3, 2, 130, 16}, {2, 3, 1, 97, 16}, {2, 3, 1, 97, 40}, false},
      {{1, 70, 33}, {1, 200, 33}, {1, 200, 8}, true},
      {{3, 65, 64}, {3, 65, 64}, {3, 65, 64}, true},
      {{1, 40, 2048}, {1, 50, 2048}, {1, 50, 1000}, true}};
  for (DType dtype : testing::kFloatDTypes) {
    for (const Case& c : cases) {
      const std::string what =
          absl::StrCat("attention ", std::string(DTypeName(dtype)), " q ",
                       ShapeToString(c.q), " k ", ShapeToString(c.k), " v ",
                       ShapeToString(c.v), c.causal ? " causal" : "");
      const Tensor q = RandomTensor(c.q, dtype, Layout::kContiguous, rng);
      const Tensor k = RandomTensor(c.k, dtype, Layout::kTransposed, rng);
      const Tensor v = RandomTensor(c.v, dtype, Layout::kContiguous, rng);
      const absl::StatusOr<Tensor> out =
          ScaledDotProductAttention(q, k, v, c.causal, 0);
      ExpectMatches(
          ScaledDotProductAttention(OnGpu(q), OnGpu(k), OnGpu(v), c.causal, 0),
          out, what, 8);
      ASSERT_TRUE(out.ok()) << what;
      const Tensor grad =
          RandomTensor(out->shape(), dtype, Layout::kContiguous, rng);
      const absl::StatusOr<AttentionGrads> cpu =
          ScaledDotProductAttentionBackward(q, k, v, *out, grad, c.causal);
      const absl::StatusOr<AttentionGrads> gpu =
          ScaledDotProductAttentionBackward(OnGpu(q), OnGpu(k), OnGpu(v),
                                            OnGpu(*out), OnGpu(grad), c.causal);
      ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
      ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
      ExpectMatches(gpu->dq, cpu->dq, what + " dq", 16);
      ExpectMatches(gpu->dk, cpu->dk, what + " dk", 16);
      ExpectMatches(gpu->dv, cpu->dv, what + " dv", 16);
    }
  }
}

TEST(CudaOpsTest, IndexOps) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  const std::vector<Layout> layouts = {Layout::kContiguous, Layout::kTransposed,
                                       Layout::kStrided};
  for (int trial = 0; trial < 30; ++trial) {
    const DType dtype = testing::Pick(testing::kNumericDTypes, rng);
    const DType index_dtype =
        testing::Pick(std::vector<DType>{DType::kI32, DType::kI64}, rng);
    Shape shape;
    for (int d = 0; d < 3; ++d) {
      shape.push_back(std::uniform_int_distribution<int64_t>(1, 9)(rng));
    }
    const Tensor x =
        RandomTensor(shape, dtype, testing::Pick(layouts, rng), rng, -5, 5);
    const int64_t dim = std::uniform_int_distribution<int64_t>(0, 2)(rng);
    const std::string what =
        absl::StrCat(std::string(DTypeName(dtype)), " ", ShapeToString(shape),
                     " dim ", dim, " trial ", trial);
    const Tensor rows = RandomIndices({11}, shape[dim], index_dtype, rng);
    ExpectMatches(IndexSelect(OnGpu(x), dim, OnGpu(rows)),
                  IndexSelect(x, dim, rows), "IndexSelect " + what, 0);
    // An index smaller than x off `dim`, longer on it: duplicate targets.
    Shape index_shape = shape;
    for (int64_t& size : index_shape) {
      size = std::uniform_int_distribution<int64_t>(1, size)(rng);
    }
    index_shape[dim] = 2 * shape[dim] + 3;
    const Tensor index =
        RandomIndices(index_shape, shape[dim], index_dtype, rng);
    ExpectMatches(Gather(OnGpu(x), dim, OnGpu(index)), Gather(x, dim, index),
                  "Gather " + what, 0);
    const Tensor src = RandomTensor(index_shape, dtype,
                                    testing::Pick(layouts, rng), rng, -5, 5);
    // The CPU rounds 16-bit sums after every add, the device once; atomic
    // adds come in any order.
    ExpectMatches(ScatterAdd(OnGpu(x), dim, OnGpu(index), OnGpu(src)),
                  ScatterAdd(x, dim, index, src), "ScatterAdd " + what, 40);
    // Indices may stay on the host.
    ExpectMatches(ScatterAdd(OnGpu(x), dim, index, OnGpu(src)),
                  ScatterAdd(x, dim, index, src), "ScatterAdd host index", 40);
  }
}

TEST(CudaOpsTest, IndexErrorsAreTheCpuOnes) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const Tensor x = *Tensor::Zeros({4, 3}, DType::kF32);
  const Tensor bad = *Tensor::FromVector<int64_t>({1, 4}, {2});
  const Tensor bad2d = *Tensor::FromVector<int64_t>({0, -1, 2}, {3, 1});
  const Tensor src = *Tensor::Ones({3, 1}, DType::kF32);
  const auto expect_same = [](const absl::StatusOr<Tensor>& gpu,
                              const absl::StatusOr<Tensor>& cpu) {
    ASSERT_FALSE(cpu.ok());
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status(), cpu.status());
  };
  expect_same(IndexSelect(OnGpu(x), 0, OnGpu(bad)), IndexSelect(x, 0, bad));
  expect_same(Gather(OnGpu(x), 0, OnGpu(bad2d)), Gather(x, 0, bad2d));
  expect_same(ScatterAdd(OnGpu(x), 0, OnGpu(bad2d), OnGpu(src)),
              ScatterAdd(x, 0, bad2d, src));
  const absl::StatusOr<Tensor> out = IndexSelect(OnGpu(x), 0, OnGpu(bad));
  EXPECT_NE(out.status().message().find("index 4"), std::string::npos)
      << out.status();
}

// The host form of the dropout body (which index_random_body_test checks
// against the CPU's Generator mask bit for bit) in x's dtype.
Tensor HostDropout(const Tensor& x, double p, uint64_t seed, uint64_t base,
                   const Strides& position_strides) {
  const Tensor input = x.Contiguous();
  Tensor out = *Tensor::Empty(x.shape(), x.dtype());
  cuda::StridedShape<1> positions;
  positions.ndim = static_cast<int>(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) {
    positions.sizes[d] = x.size(d);
    positions.strides[0][d] = position_strides[d];
  }
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i) {
      cuda::DropoutElement(static_cast<const T*>(input.raw_data()),
                           static_cast<T*>(out.raw_data()), positions, base,
                           seed, p, 1.0 / (1.0 - p), i);
    }
  };
  switch (x.dtype()) {
    case DType::kF32:
      run(float{});
      break;
    case DType::kF64:
      run(double{});
      break;
    case DType::kBF16:
      run(cuda::Bf16{});
      break;
    case DType::kF16:
      run(cuda::F16{});
      break;
    default:
      ADD_FAILURE() << "HostDropout: dtype " << DTypeName(x.dtype());
  }
  return out;
}

TEST(CudaOpsTest, DropoutIsBitIdenticalToTheHostStream) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 12; ++trial) {
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const Shape shape = {std::uniform_int_distribution<int64_t>(1, 40)(rng),
                         std::uniform_int_distribution<int64_t>(1, 300)(rng)};
    // x is the block at (5, 7) of a [shape[0] + 5, shape[1] + 7] tensor.
    const Strides global = ContiguousStrides({shape[0] + 5, shape[1] + 7});
    const uint64_t seed = (static_cast<uint64_t>(rng()) << 32) | rng();
    const uint64_t base = rng() + 5 * global[0] + 7;
    const double p = testing::Pick(std::vector<double>{0.0, 0.1, 0.5}, rng);
    const Tensor x =
        RandomTensor(shape, dtype, Layout::kTransposed, rng, -3, 3);
    ExpectMatches(cuda::DropoutOnDevice(OnGpu(x), p, seed, base, global),
                  HostDropout(x, p, seed, base, global),
                  absl::StrCat("Dropout ", std::string(DTypeName(dtype)), " ",
                               ShapeToString(shape), " p ", p),
                  0);
  }
}

// The fused step on the device against the CPU kernel (the same body;
// the device may contract a * b + c into one rounding), three steps from
// random states, on contiguous and strided operands.
TEST(CudaOpsTest, AdamWStepMatchesTheCpuKernel) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  const std::vector<Layout> layouts = {Layout::kContiguous, Layout::kTransposed,
                                       Layout::kStrided};
  for (int trial = 0; trial < 12; ++trial) {
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const Shape shape = {std::uniform_int_distribution<int64_t>(1, 30)(rng),
                         std::uniform_int_distribution<int64_t>(1, 70)(rng)};
    const Layout layout = testing::Pick(layouts, rng);
    const Tensor p = RandomTensor(shape, dtype, layout, rng);
    const Tensor m = RandomTensor(shape, dtype, layout, rng, -0.1, 0.1);
    const Tensor v = RandomTensor(shape, dtype, layout, rng, 0, 0.01);
    // The device copies keep the layout (ToGpu copies the whole base).
    const Tensor gpu_p = OnGpu(p), gpu_m = OnGpu(m), gpu_v = OnGpu(v);
    const Tensor cpu_p = p, cpu_m = m, cpu_v = v;
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor g =
          RandomTensor(shape, dtype, testing::Pick(layouts, rng), rng, -1, 1);
      const AdamWOptions args = {1e-2, 0.9, 0.999, 1e-8, 0.01};
      ASSERT_TRUE(AdamWStep(gpu_p, gpu_m, gpu_v, OnGpu(g), args, step).ok());
      ASSERT_TRUE(AdamWStep(cpu_p, cpu_m, cpu_v, g, args, step).ok());
    }
    const std::string what =
        absl::StrCat("AdamW ", std::string(DTypeName(dtype)), " ",
                     ShapeToString(shape), " ", testing::LayoutName(layout));
    ExpectMatches(gpu_p, cpu_p, what + " param");
    ExpectMatches(gpu_m, cpu_m, what + " exp_avg");
    ExpectMatches(gpu_v, cpu_v, what + " exp_avg_sq");
  }
  const Tensor p = *Tensor::Zeros({4}, DType::kF32, kGpu);
  const Tensor m = *Tensor::Zeros({4}, DType::kF32, kGpu);
  const Tensor v = *Tensor::Zeros({4}, DType::kF32, kGpu);
  const Tensor cpu_grad = *Tensor::Zeros({4}, DType::kF32);
  const absl::Status mixed = AdamWStep(p, m, v, cpu_grad, {}, 1);
  EXPECT_FALSE(mixed.ok());
  EXPECT_NE(mixed.message().find("grad"), std::string::npos) << mixed;
}

TEST(CudaOpsTest, ErrorsNameTheBadValue) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const Tensor table = *Tensor::Zeros({4, 2}, DType::kF32, kGpu);
  const Tensor indices = *Tensor::FromVector<int64_t>({7}, {1});
  absl::StatusOr<Tensor> out = Embedding(indices, table);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("7"), std::string::npos);
}

// CUDA indices are checked on the device: the bad index surfaces at the next
// read on this thread (index_checks.h), once, as the CPU's error.
TEST(CudaOpsTest, DeviceIndexChecksAreDeferredToTheNextRead) {
  DTENSOR_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(ReadDeferredIndexChecks().ok());
  const Tensor table = *Tensor::Ones({4, 2}, DType::kF32, kGpu);
  for (DType dtype : {DType::kI32, DType::kI64}) {
    const Tensor bad =
        OnGpu(*Tensor::FromVector<int64_t>({1, 9, 2}, {3})->To(dtype));
    absl::StatusOr<Tensor> out = Embedding(bad, table);
    ASSERT_TRUE(out.ok()) << out.status();
    const absl::Status read = out->To(Device::CPU()).status();
    EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument) << read;
    EXPECT_NE(read.message().find("index 9 is out of range [0, 4)"),
              std::string::npos)
        << read;
    EXPECT_TRUE(ReadDeferredIndexChecks().ok()) << "read once";
    ASSERT_TRUE(
        EmbeddingBackward(bad, *Tensor::Ones({3, 2}, DType::kF32, kGpu), 4)
            .ok());
    const absl::StatusOr<double> item = Sum(*out)->Item();
    EXPECT_EQ(item.status().code(), absl::StatusCode::kInvalidArgument);
  }
  const Tensor good = OnGpu(*Tensor::FromVector<int64_t>({3, 0}, {2}));
  const Tensor rows = *Embedding(good, table);
  EXPECT_TRUE(ReadDeferredIndexChecks().ok());
  EXPECT_EQ(rows.ToVector<float>().value(), std::vector<float>(4, 1.0f));
  // The negative index of an empty table.
  const Tensor empty = *Tensor::Zeros({0, 2}, DType::kF32, kGpu);
  ASSERT_TRUE(
      Embedding(OnGpu(*Tensor::FromVector<int64_t>({-1}, {1})), empty).ok());
  const absl::Status empty_read = ReadDeferredIndexChecks();
  EXPECT_NE(empty_read.message().find("index -1"), std::string::npos)
      << empty_read;
}

TEST(CudaOpsTest, AllocatorReusesBlocksInTheSteadyState) {
  DTENSOR_SKIP_WITHOUT_GPU();
  for (int step = 0; step < 3; ++step) {
    const Tensor x = *Tensor::Ones({1024, 1024}, DType::kF32, kGpu);
    const Tensor y = *Add(x, x);
    ASSERT_EQ(y.At({5, 5}), 2.0);
  }
  const cuda::MemoryStats before = cuda::GetMemoryStats(0);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = *Tensor::Ones({1024, 1024}, DType::kF32, kGpu);
    const Tensor y = *Add(x, x);
  }
  const cuda::MemoryStats after = cuda::GetMemoryStats(0);
  EXPECT_EQ(after.backing_allocations, before.backing_allocations);
  EXPECT_GT(after.cache_hits, before.cache_hits);
  EXPECT_GE(after.peak_allocated, 2 * 4 << 20);
}

TEST(CudaOpsTest, EventsOrderAnotherStream) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const Tensor x = *Tensor::Full({1 << 20}, 3.0, DType::kF32, kGpu);
  absl::StatusOr<cuda::Event> event = cuda::Event::Record(0);
  ASSERT_TRUE(event.ok()) << event.status();
  absl::StatusOr<void*> stream = cuda::CurrentStream(0);
  ASSERT_TRUE(stream.ok());
  EXPECT_TRUE(event->BlockStream(*stream).ok());
  EXPECT_TRUE(event->Wait().ok());
  EXPECT_EQ(x.At({12345}), 3.0);
}

}  // namespace
}  // namespace dtensor
