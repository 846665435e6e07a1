// The host forms of the CUDA kernel bodies (dtensor/tensor/cuda/*_body.h)
// against the CPU kernels of dtensor/tensor/: bit-exact where the math is the
// same (one lane visits a row in the CPU kernel's order), within stated
// tolerances where the order of a sum differs (several lanes, or the CPU's
// blocked reductions).
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/index_body.h"
#include "dtensor/tensor/cuda/random_body.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/half.h"
#include "dtensor/tensor/indexing.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/reduction.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomTensor;

// Calls fn(Device{}, Host{}) with the kernels' storage type and
// dtensor/tensor/'s for `dtype`.
template <typename Fn>
void ForStorage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{}, float{});
    case DType::kF64:
      return fn(double{}, double{});
    case DType::kBF16:
      return fn(Bf16{}, BFloat16{});
    case DType::kF16:
      return fn(F16{}, Half{});
    case DType::kI32:
      return fn(int32_t{}, int32_t{});
    case DType::kI64:
      return fn(int64_t{}, int64_t{});
    case DType::kBool:
      return fn(bool{}, bool{});
  }
}

// ForStorage for a floating `dtype` only (fn is not instantiated for the
// integer types).
template <typename Fn>
void ForFloatingStorage(DType dtype, Fn&& fn) {
  ForStorage(dtype, [&](auto tag, auto host_tag) {
    if constexpr (std::is_floating_point_v<Compute<decltype(tag)>>) {
      fn(tag, host_tag);
    }
  });
}

// The raw bytes of a contiguous tensor.
std::vector<uint8_t> Bytes(const Tensor& t) {
  const Tensor c = t.Contiguous();
  const auto* begin = static_cast<const uint8_t*>(c.raw_data());
  return std::vector<uint8_t>(begin, begin + c.nbytes());
}

TEST(HostDeviceTest, SixteenBitConversionsMatchHalfH) {
  std::mt19937 rng(1);
  std::vector<float> values = {0.0f,     -0.0f,     1.0f,  -2.5f,      65504.0f,
                               65520.0f, 1e-8f,     6e-8f, 3e-5f,      1e38f,
                               INFINITY, -INFINITY, NAN,   1.00390625f};
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t word = bits(rng);
    float value;
    std::memcpy(&value, &word, sizeof(value));
    values.push_back(value);
  }
  for (const float value : values) {
    ASSERT_EQ(ToBf16(value).bits, BFloat16(value).bits) << value;
    ASSERT_EQ(ToF16(value).bits, Half(value).bits) << value;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    Half half;
    half.bits = static_cast<uint16_t>(h);
    BFloat16 bf;
    bf.bits = static_cast<uint16_t>(h);
    const float expected_half = half;
    const float expected_bf = bf;
    const float got_half = ToFloat(F16{static_cast<uint16_t>(h)});
    const float got_bf = ToFloat(Bf16{static_cast<uint16_t>(h)});
    ASSERT_EQ(std::memcmp(&got_half, &expected_half, 4), 0) << h;
    ASSERT_EQ(std::memcmp(&got_bf, &expected_bf, 4), 0) << h;
  }
}

// The StridedShape of `shape` for operands with `strides`, dims as they are
// (the CUDA launches merge dims first, which visits the same elements in the
// same order).
template <int N>
StridedShape<N> StridedShapeOf(const Shape& shape,
                               const std::array<Strides, N>& strides) {
  StridedShape<N> strided;
  strided.ndim = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    strided.sizes[d] = shape[d];
    for (int k = 0; k < N; ++k) strided.strides[k][d] = strides[k][d];
  }
  return strided;
}

// Runs a binary body over `out`'s shape the way the CUDA kernel indexes it.
Tensor HostBinary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = *BroadcastShapes(a.shape(), b.shape());
  const Tensor av = *a.Expand(shape);
  const Tensor bv = *b.Expand(shape);
  const DType out_dtype = IsComparison(op) ? DType::kBool : a.dtype();
  Tensor out = *Tensor::Empty(shape, out_dtype);
  const StridedShape<3> strided =
      StridedShapeOf<3>(shape, {out.strides(), av.strides(), bv.strides()});
  ForStorage(a.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(av.raw_data());
    const T* y = static_cast<const T*>(bv.raw_data());
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t offsets[3];
      OperandOffsetsAt(strided, i, offsets);
      if (out_dtype == DType::kBool) {
        BinaryElement(op, x + offsets[1], y + offsets[2],
                      out.data<bool>() + offsets[0]);
      } else {
        BinaryElement(op, x + offsets[1], y + offsets[2],
                      static_cast<T*>(out.raw_data()) + offsets[0]);
      }
    }
  });
  return out;
}

TEST(ElementwiseBodyTest, BinaryOpsMatchTheCpuKernelsBitForBit) {
  std::mt19937 rng(2);
  struct Case {
    BinaryOp op;
    absl::StatusOr<Tensor> (*cpu)(const Tensor&, const Tensor&);
    bool floating_only;
  };
  const std::vector<Case> cases = {
      {BinaryOp::kAdd, ::dtensor::Add, false},
      {BinaryOp::kSub, ::dtensor::Sub, false},
      {BinaryOp::kMul, ::dtensor::Mul, false},
      {BinaryOp::kDiv, ::dtensor::Div, true},
      {BinaryOp::kPow, ::dtensor::Pow, true},
      {BinaryOp::kSiluBackward, ::dtensor::SiluBackward, true},
      {BinaryOp::kMaximum, ::dtensor::Maximum, false},
      {BinaryOp::kMinimum, ::dtensor::Minimum, false},
      {BinaryOp::kEq, ::dtensor::Eq, false},
      {BinaryOp::kLt, ::dtensor::Lt, false},
      {BinaryOp::kGe, ::dtensor::Ge, false}};
  const std::vector<std::pair<Shape, Shape>> shapes = {{{7, 5}, {7, 5}},
                                                       {{4, 6}, {6}},
                                                       {{3, 1, 5}, {1, 4, 5}},
                                                       {{8, 3}, {8, 1}},
                                                       {{}, {5}}};
  for (const Case& c : cases) {
    for (DType dtype : testing::kNumericDTypes) {
      if (c.floating_only && !IsFloatingPoint(dtype)) continue;
      for (const auto& [sa, sb] : shapes) {
        const Tensor a = RandomTensor(sa, dtype, Layout::kStrided, rng, 0.5, 2);
        const Tensor b =
            RandomTensor(sb, dtype, Layout::kContiguous, rng, 0.5, 2);
        const Tensor expected = *c.cpu(a, b);
        const Tensor got = HostBinary(c.op, a, b);
        ASSERT_EQ(got.shape(), expected.shape());
        EXPECT_EQ(Bytes(got), Bytes(expected))
            << static_cast<int>(c.op) << " " << DTypeName(dtype) << " "
            << ShapeToString(sa) << " " << ShapeToString(sb);
      }
    }
  }
}

TEST(ElementwiseBodyTest, UnaryOpsMatchTheCpuKernelsBitForBit) {
  std::mt19937 rng(3);
  struct Case {
    UnaryOp op;
    absl::StatusOr<Tensor> (*cpu)(const Tensor&);
  };
  const std::vector<Case> cases = {{UnaryOp::kNeg, ::dtensor::Neg},
                                   {UnaryOp::kAbs, ::dtensor::Abs},
                                   {UnaryOp::kExp, ::dtensor::Exp},
                                   {UnaryOp::kLog, ::dtensor::Log},
                                   {UnaryOp::kSqrt, ::dtensor::Sqrt},
                                   {UnaryOp::kRsqrt, ::dtensor::Rsqrt},
                                   {UnaryOp::kRelu, ::dtensor::Relu},
                                   {UnaryOp::kSilu, ::dtensor::Silu},
                                   {UnaryOp::kSigmoid, ::dtensor::Sigmoid},
                                   {UnaryOp::kTanh, ::dtensor::Tanh}};
  for (const Case& c : cases) {
    for (DType dtype : testing::kFloatDTypes) {
      const Tensor x =
          RandomTensor({33, 7}, dtype, Layout::kContiguous, rng, 0.1, 3);
      const Tensor expected = *c.cpu(x);
      Tensor got = *Tensor::Empty(x.shape(), dtype);
      ForFloatingStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.numel(); ++i) {
          UnaryElement(c.op, static_cast<const T*>(x.raw_data()) + i,
                       static_cast<T*>(got.raw_data()) + i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << static_cast<int>(c.op) << " " << DTypeName(dtype);
    }
  }
  const Tensor x = RandomTensor({50}, DType::kF32, Layout::kContiguous, rng);
  for (auto [op, approx] :
       {std::pair{UnaryOp::kGeluErf, GeluApproximation::kNone},
        std::pair{UnaryOp::kGeluTanh, GeluApproximation::kTanh}}) {
    const Tensor expected = *Gelu(x, approx);
    Tensor got = *Tensor::Empty(x.shape(), DType::kF32);
    for (int64_t i = 0; i < 50; ++i) {
      UnaryElement(op, x.data<float>() + i, got.data<float>() + i);
    }
    EXPECT_EQ(Bytes(got), Bytes(expected));
  }
}

TEST(ElementwiseBodyTest, CastsMatchTensorToBitForBit) {
  std::mt19937 rng(4);
  for (DType from : testing::kAllDTypes) {
    const Tensor x =
        RandomTensor({257}, from, Layout::kContiguous, rng, -300, 300);
    for (DType to : testing::kAllDTypes) {
      const Tensor expected = *x.To(to);
      Tensor got = *Tensor::Empty(x.shape(), to);
      ForStorage(from, [&](auto from_tag, auto) {
        using From = decltype(from_tag);
        ForStorage(to, [&](auto to_tag, auto) {
          using To = decltype(to_tag);
          for (int64_t i = 0; i < x.numel(); ++i) {
            CastElement(static_cast<const From*>(x.raw_data()) + i,
                        static_cast<To*>(got.raw_data()) + i);
          }
        });
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(from) << " -> " << DTypeName(to);
    }
  }
}

// Softmax of contiguous x along `dim` by the row bodies with `lanes` lanes,
// combined the way the CUDA kernel combines its threads.
template <typename T>
void HostSoftmax(const Tensor& x, Tensor& out, int64_t dim, bool log,
                 int lanes) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    (i < dim ? outer : i == dim ? n : inner) *= x.size(i);
  }
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    const Row<T> row{static_cast<const T*>(x.raw_data()) + base, n, inner};
    Compute<T> max = NegativeInfinity<Compute<T>>();
    for (int lane = 0; lane < lanes; ++lane) {
      max = MaxKeepingFirst(max, SoftmaxMaxPartial(row, lane, lanes));
    }
    double sum = 0;
    for (int lane = 0; lane < lanes; ++lane) {
      sum += SoftmaxSumPartial(row, max, lane, lanes);
    }
    for (int lane = 0; lane < lanes; ++lane) {
      SoftmaxWrite(row, static_cast<T*>(out.raw_data()) + base, max, sum, log,
                   lane, lanes);
    }
  }
}

TEST(RowBodyTest, SoftmaxMatchesTheCpuKernel) {
  std::mt19937 rng(5);
  for (DType dtype : testing::kFloatDTypes) {
    for (bool log : {false, true}) {
      for (int64_t dim : {0, 1, 2}) {
        const Tensor x =
            RandomTensor({3, 17, 5}, dtype, Layout::kContiguous, rng, -4, 4);
        const Tensor expected = log ? *LogSoftmax(x, dim) : *Softmax(x, dim);
        for (int lanes : {1, 4}) {
          Tensor got = *Tensor::Empty(x.shape(), dtype);
          ForFloatingStorage(dtype, [&](auto tag, auto) {
            HostSoftmax<decltype(tag)>(x, got, dim, log, lanes);
          });
          const std::string context =
              absl::StrCat(std::string(DTypeName(dtype)), " log=", log,
                           " dim=", dim, " lanes=", lanes);
          if (lanes == 1) {
            EXPECT_EQ(Bytes(got), Bytes(expected)) << context;
          } else {
            // Another summation order: a few units in the last place.
            EXPECT_TRUE(AllClose(*got.To(DType::kF64),
                                 *expected.To(DType::kF64),
                                 testing::ToleranceFor(dtype).rtol,
                                 testing::ToleranceFor(dtype).atol))
                << context;
          }
        }
      }
    }
  }
}

TEST(RowBodyTest, RmsNormMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(6);
  for (DType dtype : testing::kFloatDTypes) {
    for (bool with_weight : {false, true}) {
      const Tensor x = RandomTensor({6, 40}, dtype, Layout::kContiguous, rng);
      const Tensor w = with_weight
                           ? RandomTensor({40}, dtype, Layout::kContiguous, rng)
                           : Tensor();
      const Tensor expected = *RmsNorm(x, w, 1e-5);
      Tensor got = *Tensor::Empty(x.shape(), dtype);
      ForFloatingStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t r = 0; r < 6; ++r) {
          const Row<T> row{static_cast<const T*>(x.raw_data()) + r * 40, 40, 1};
          const double sum = SumSquaresPartial(row, 0, 1);
          RmsNormWrite(
              row, with_weight ? static_cast<const T*>(w.raw_data()) : nullptr,
              static_cast<T*>(got.raw_data()) + r * 40, sum, 1e-5, 0, 1);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected)) << DTypeName(dtype);
    }
  }
}

// LayerNorm of contiguous x [rows, width] by the row bodies with `lanes`
// lanes, combined the way the CUDA kernel combines its threads.
template <typename T>
void HostLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b,
                   Tensor& out, double eps, int lanes) {
  const int64_t width = x.size(-1);
  const auto param = [](const Tensor& p) {
    return p.defined() ? static_cast<const T*>(p.raw_data()) : nullptr;
  };
  for (int64_t r = 0; r < x.numel() / width; ++r) {
    const Row<T> row{static_cast<const T*>(x.raw_data()) + r * width, width, 1};
    double sum = 0;
    for (int lane = 0; lane < lanes; ++lane) {
      sum += ReducePartial<double>(ReduceOp::kSum, row, lane, lanes);
    }
    const double mean = sum / width;
    double centered_squares = 0;
    for (int lane = 0; lane < lanes; ++lane) {
      centered_squares += CenteredSquaresPartial(row, mean, lane, lanes);
    }
    for (int lane = 0; lane < lanes; ++lane) {
      LayerNormWrite(row, param(w), param(b),
                     static_cast<T*>(out.raw_data()) + r * width, mean,
                     centered_squares, eps, lane, lanes);
    }
  }
}

TEST(RowBodyTest, LayerNormMatchesTheCpuKernel) {
  std::mt19937 rng(10);
  for (DType dtype : testing::kFloatDTypes) {
    for (bool with_params : {false, true}) {
      // An offset mean, so that centering matters.
      const Tensor x =
          RandomTensor({7, 3, 65}, dtype, Layout::kContiguous, rng, 2, 6);
      const Tensor w = with_params
                           ? RandomTensor({65}, dtype, Layout::kContiguous, rng)
                           : Tensor();
      const Tensor b = with_params
                           ? RandomTensor({65}, dtype, Layout::kContiguous, rng)
                           : Tensor();
      const Tensor expected = *LayerNorm(x, w, b, 1e-5);
      for (int lanes : {1, 8}) {
        Tensor got = *Tensor::Empty(x.shape(), dtype);
        ForFloatingStorage(dtype, [&](auto tag, auto) {
          HostLayerNorm<decltype(tag)>(x, w, b, got, 1e-5, lanes);
        });
        const std::string context =
            absl::StrCat(std::string(DTypeName(dtype)), " params=", with_params,
                         " lanes=", lanes);
        if (lanes == 1) {
          EXPECT_EQ(Bytes(got), Bytes(expected)) << context;
        } else {
          // Sums in double in another order: the last bits of a double,
          // which rounding to the dtype almost always hides.
          EXPECT_TRUE(AllClose(*got.To(DType::kF64), *expected.To(DType::kF64),
                               testing::ToleranceFor(dtype).rtol,
                               testing::ToleranceFor(dtype).atol))
              << context;
        }
      }
    }
  }
}

TEST(RowBodyTest, CrossEntropyMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(7);
  for (DType dtype : testing::kFloatDTypes) {
    const Tensor logits =
        RandomTensor({9, 31}, dtype, Layout::kContiguous, rng, -5, 5);
    Tensor target = RandomIndices({9}, 31, DType::kI64, rng);
    target.data<int64_t>()[3] = -100;  // Ignored.
    const Tensor expected = *CrossEntropy(logits, target, Reduction::kSum);
    double total = 0;
    ForFloatingStorage(dtype, [&](auto tag, auto) {
      using T = decltype(tag);
      for (int64_t r = 0; r < 9; ++r) {
        const int64_t t = target.data<int64_t>()[r];
        if (t == -100) continue;
        const Row<T> row{static_cast<const T*>(logits.raw_data()) + r * 31, 31,
                         1};
        const double max = LogSumExpMaxPartial(row, 0, 1);
        const double sum = LogSumExpSumPartial(row, max, 0, 1);
        total += CrossEntropyLoss(row, max, sum, t);
      }
    });
    EXPECT_EQ(Bytes(Tensor::Scalar(total, dtype)), Bytes(expected))
        << DTypeName(dtype);
  }
}

TEST(RowBodyTest, ReductionsMatchTheCpuKernels) {
  std::mt19937 rng(8);
  for (DType dtype : testing::kNumericDTypes) {
    const Tensor x =
        RandomTensor({5, 300}, dtype, Layout::kContiguous, rng, -9, 9);
    const Tensor sum = *Sum(x, {1});
    const Tensor max = *Max(x, {1});
    const Tensor min = *Min(x, {1});
    ForStorage(dtype, [&](auto tag, auto) {
      using T = decltype(tag);
      using C = Compute<T>;
      using SumAcc =
          std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
      for (int64_t r = 0; r < 5; ++r) {
        const Row<T> row{static_cast<const T*>(x.raw_data()) + r * 300, 300, 1};
        SumAcc s = 0;
        C hi = ReducePartial<C>(ReduceOp::kMax, row, 0, 4);
        C lo = ReducePartial<C>(ReduceOp::kMin, row, 0, 4);
        for (int lane = 0; lane < 4; ++lane) {
          s = ReduceCombine(
              ReduceOp::kSum, s,
              ReducePartial<SumAcc>(ReduceOp::kSum, row, lane, 4));
          hi = ReduceCombine(ReduceOp::kMax, hi,
                             ReducePartial<C>(ReduceOp::kMax, row, lane, 4));
          lo = ReduceCombine(ReduceOp::kMin, lo,
                             ReducePartial<C>(ReduceOp::kMin, row, lane, 4));
        }
        // Sums of 300 terms in double: another order changes at most the
        // last bits before the result is rounded to the dtype.
        EXPECT_NEAR(Load(Store<T>(s)), sum.At({r}),
                    1e-9 * 300 * 9 + (IsFloatingPoint(dtype)
                                          ? testing::ToleranceFor(dtype).rtol *
                                                std::fabs(sum.At({r}))
                                          : 0))
            << DTypeName(dtype);
        EXPECT_EQ(static_cast<double>(hi), max.At({r})) << DTypeName(dtype);
        EXPECT_EQ(static_cast<double>(lo), min.At({r})) << DTypeName(dtype);
      }
    });
  }
}

TEST(RowBodyTest, SumOfSquaresMatchesTheCpuKernel) {
  std::mt19937 rng(15);
  for (DType dtype : testing::kFloatDTypes) {
    const Tensor x =
        RandomTensor({5, 300}, dtype, Layout::kContiguous, rng, -9, 9);
    const Tensor expected = *SumOfSquares(x, {1});
    ASSERT_EQ(expected.dtype(), DType::kF64);
    ForFloatingStorage(dtype, [&](auto tag, auto) {
      using T = decltype(tag);
      for (int64_t r = 0; r < 5; ++r) {
        const Row<T> row{static_cast<const T*>(x.raw_data()) + r * 300, 300, 1};
        double total = 0;
        for (int lane = 0; lane < 4; ++lane) {
          total = ReduceCombine(
              ReduceOp::kSumSquares, total,
              ReducePartial<double>(ReduceOp::kSumSquares, row, lane, 4));
        }
        // 300 non-negative terms in double: another order than the CPU's
        // blocked one changes only the last bits.
        EXPECT_NEAR(total, expected.At({r}), 1e-12 * expected.At({r}))
            << DTypeName(dtype);
      }
    });
  }
}

TEST(RowBodyTest, RotaryMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(9);
  const int64_t seq = 5, heads = 3, half = 4;
  for (DType dtype : testing::kFloatDTypes) {
    const Tensor x = RandomTensor({2, seq, heads, 2 * half}, dtype,
                                  Layout::kContiguous, rng);
    const Tensor expected = *RotaryEmbedding(x, Tensor(), 10000.0);
    Tensor got = *Tensor::Empty(x.shape(), dtype);
    ForFloatingStorage(dtype, [&](auto tag, auto) {
      using T = decltype(tag);
      for (int64_t o = 0; o < 2; ++o) {
        for (int64_t s = 0; s < seq; ++s) {
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t base = ((o * seq + s) * heads + h) * 2 * half;
            for (int64_t i = 0; i < half; ++i) {
              const double angle = s * std::pow(10000.0, -2.0 * i / (2 * half));
              RotatePair(static_cast<const T*>(x.raw_data()) + base,
                         static_cast<T*>(got.raw_data()) + base, i, half,
                         std::cos(angle), std::sin(angle));
            }
          }
        }
      }
    });
    EXPECT_EQ(Bytes(got), Bytes(expected)) << DTypeName(dtype);
  }
}

TEST(RowBodyTest, MaskedSoftmaxMatchesABruteForceReference) {
  const int64_t lq = 3, lk = 5;
  std::vector<double> scores(lq * lk);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = std::sin(i * 1.7) * 3;
  std::vector<double> got = scores;
  for (int64_t q = 0; q < lq; ++q) {
    double* row = got.data() + q * lk;
    const int64_t visible = VisibleKeys(q, lq, lk, /*causal=*/true);
    EXPECT_EQ(visible, q + (lk - lq) + 1);
    const double max = ScaledMaxPartial(row, visible, 0.5, 0, 1);
    const double sum = ExpInPlacePartial(row, visible, max, 0, 1);
    NormalizeMasked(row, visible, lk, sum, 0, 1);
    double denominator = 0;
    for (int64_t j = 0; j < visible; ++j)
      denominator += std::exp(0.5 * scores[q * lk + j]);
    for (int64_t j = 0; j < lk; ++j) {
      const double expected =
          j < visible ? std::exp(0.5 * scores[q * lk + j]) / denominator : 0.0;
      EXPECT_NEAR(row[j], expected, 1e-12) << q << " " << j;
    }
  }
}

// ---- Index ops. ----

Strides WithDimZeroed(Strides strides, int64_t dim) {
  strides[dim] = 0;
  return strides;
}

TEST(IndexBodyTest, IndexSelectMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(11);
  for (DType dtype : testing::kAllDTypes) {
    const Tensor x = RandomTensor({4, 5, 6}, dtype, Layout::kStrided, rng);
    for (int64_t dim : {0, 1, 2}) {
      const Tensor index = RandomIndices({7}, x.size(dim), DType::kI64, rng);
      const Tensor expected = *IndexSelect(x, dim, index);
      Tensor got = *Tensor::Empty(expected.shape(), dtype);
      const Tensor input = x.Contiguous();
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < 3; ++d) {
        if (d < dim) outer *= x.size(d);
        if (d > dim) inner *= x.size(d);
      }
      ForStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < got.numel(); ++i) {
          IndexSelectElement(
              static_cast<const T*>(input.raw_data()), index.data<int64_t>(),
              static_cast<T*>(got.raw_data()), i, 7, x.size(dim), inner);
        }
      });
      EXPECT_EQ(outer * 7 * inner, got.numel());
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(dtype) << " dim " << dim;
    }
  }
}

// An index shape that fits x [5, 6, 7] along `dim` (smaller off it).
Shape IndexShapeFor(int64_t dim, int64_t size_on_dim) {
  Shape shape = {4, 5, 6};
  shape[dim] = size_on_dim;
  return shape;
}

TEST(IndexBodyTest, GatherMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(12);
  for (DType dtype : testing::kAllDTypes) {
    const Tensor x = RandomTensor({5, 6, 7}, dtype, Layout::kTransposed, rng);
    for (int64_t dim : {0, 1, 2}) {
      const Tensor index =
          RandomIndices(IndexShapeFor(dim, 9), x.size(dim), DType::kI64, rng);
      const Tensor expected = *Gather(x, dim, index);
      Tensor got = *Tensor::Empty(index.shape(), dtype);
      const StridedShape<1> shape =
          StridedShapeOf<1>(index.shape(), {WithDimZeroed(x.strides(), dim)});
      ForStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < got.numel(); ++i) {
          GatherElement(static_cast<const T*>(x.raw_data()),
                        index.data<int64_t>(), static_cast<T*>(got.raw_data()),
                        shape, x.strides()[dim], i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(dtype) << " dim " << dim;
    }
  }
}

// ScatterAdd by the body with a sequential add, accumulating as the CUDA
// launch does (float for the 16-bit floats).
Tensor HostScatterAdd(const Tensor& x, int64_t dim, const Tensor& index,
                      const Tensor& src) {
  const bool sixteen_bit =
      x.dtype() == DType::kBF16 || x.dtype() == DType::kF16;
  Tensor acc =
      *x.Contiguous().Clone().To(sixteen_bit ? DType::kF32 : x.dtype());
  const StridedShape<2> shape = StridedShapeOf<2>(
      index.shape(), {WithDimZeroed(acc.strides(), dim), src.strides()});
  ForStorage(x.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using A = Compute<T>;
      for (int64_t i = 0; i < index.numel(); ++i) {
        ScatterAddElement(
            static_cast<const T*>(src.raw_data()), index.data<int64_t>(),
            static_cast<A*>(acc.raw_data()), shape, acc.strides()[dim], i,
            [](A* slot, A value) { *slot += value; });
      }
    }
  });
  return *acc.To(x.dtype());
}

TEST(IndexBodyTest, ScatterAddMatchesTheCpuKernel) {
  std::mt19937 rng(13);
  for (DType dtype : testing::kNumericDTypes) {
    const Tensor x = RandomTensor({5, 6, 7}, dtype, Layout::kStrided, rng);
    for (int64_t dim : {0, 1, 2}) {
      // One addend per slot at most (size 1 on dim), then duplicates.
      for (int64_t size_on_dim : {1, 9}) {
        const Shape index_shape = IndexShapeFor(dim, size_on_dim);
        const Tensor index =
            RandomIndices(index_shape, x.size(dim), DType::kI64, rng);
        const Tensor src =
            RandomTensor(index_shape, dtype, Layout::kTransposed, rng);
        const Tensor expected = *ScatterAdd(x, dim, index, src);
        const Tensor got = HostScatterAdd(x, dim, index, src);
        const std::string context = absl::StrCat(
            std::string(DTypeName(dtype)), " dim ", dim, " size ", size_on_dim);
        const bool rounds_once = dtype == DType::kBF16 || dtype == DType::kF16;
        if (size_on_dim == 1 || !rounds_once) {
          EXPECT_EQ(Bytes(got), Bytes(expected)) << context;
        } else {
          // The CPU rounds to the dtype after every add, the body once.
          const testing::Tolerance tolerance = testing::ToleranceFor(dtype);
          EXPECT_TRUE(AllClose(*got.To(DType::kF64), *expected.To(DType::kF64),
                               8 * tolerance.rtol, 8 * tolerance.atol))
              << context;
        }
      }
    }
  }
}

// EmbeddingBackward of table rows [first_row, first_row + num_rows) by the
// body with a sequential add over grad's elements in order, accumulating as
// the CUDA launch does (float for the 16-bit floats).
Tensor HostEmbeddingBackward(const Tensor& indices, const Tensor& grad,
                             int64_t first_row, int64_t num_rows) {
  const int64_t width = grad.size(-1);
  const Tensor source = grad.Contiguous();
  const Tensor rows = *indices.Contiguous().To(DType::kI64);
  const bool sixteen_bit =
      grad.dtype() == DType::kBF16 || grad.dtype() == DType::kF16;
  Tensor acc = *Tensor::Zeros({num_rows, width},
                              sixteen_bit ? DType::kF32 : grad.dtype());
  ForFloatingStorage(grad.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    using A = Compute<T>;
    for (int64_t e = 0; e < source.numel(); ++e) {
      RowIndexAddElement(static_cast<const T*>(source.raw_data()),
                         rows.data<int64_t>(), static_cast<A*>(acc.raw_data()),
                         first_row, num_rows, width, e,
                         [](A* slot, A value) { *slot += value; });
    }
  });
  return *acc.To(grad.dtype());
}

TEST(IndexBodyTest, EmbeddingBackwardMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(16);
  const auto uniform = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(rng);
  };
  for (int trial = 0; trial < 40; ++trial) {
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const DType index_dtype =
        testing::Pick(std::vector<DType>{DType::kI32, DType::kI64}, rng);
    // Few table rows for many indices: repeated rows; a block of the rows:
    // indices outside it skipped.
    const int64_t table_rows = uniform(1, 9);
    const int64_t first_row = uniform(0, table_rows);
    const int64_t num_rows = uniform(0, table_rows - first_row);
    const Shape index_shape = {uniform(1, 4), uniform(1, 12)};
    const int64_t width = uniform(1, 9);
    const Tensor indices =
        RandomIndices(index_shape, table_rows, index_dtype, rng);
    const Tensor grad = RandomTensor(
        {index_shape[0], index_shape[1], width}, dtype,
        testing::Pick(
            std::vector<Layout>{Layout::kContiguous, Layout::kTransposed}, rng),
        rng, -5, 5);
    const Tensor expected =
        *EmbeddingBackward(indices, grad, table_rows, first_row, num_rows);
    const Tensor got =
        HostEmbeddingBackward(indices, grad, first_row, num_rows);
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_EQ(Bytes(got), Bytes(expected))
        << DTypeName(dtype) << " trial " << trial << " rows [" << first_row
        << ", " << first_row + num_rows << ") of " << table_rows;
  }
}

// ---- Dropout. ----

TEST(RandomBodyTest, DropoutReproducesTheGeneratorsMaskBitForBit) {
  std::mt19937 rng(14);
  // A block [3, 4, 5] at (2, 0, 3) of a tensor [6, 4, 9].
  const Shape global = {6, 4, 9};
  const Shape block = {3, 4, 5};
  const std::vector<int64_t> block_offset = {2, 0, 3};
  const uint64_t seed = 0x123456789abcdefULL;
  const uint64_t offset = 1000003;
  const Strides global_strides = ContiguousStrides(global);
  uint64_t base = offset;
  for (int d = 0; d < 3; ++d) base += block_offset[d] * global_strides[d];
  for (DType dtype : testing::kFloatDTypes) {
    for (double p : {0.0, 0.1, 0.5, 0.9}) {
      const Tensor x = RandomTensor(block, dtype, Layout::kContiguous, rng);
      // The reference: each element's draw at its global position, as
      // dtensor/ops/random_ops.cc draws it with a Generator, the mask in the
      // dtype.
      std::vector<double> mask;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const std::vector<int64_t> local = testing::Unravel(i, block);
        std::vector<int64_t> global_index(3);
        for (int d = 0; d < 3; ++d) {
          global_index[d] = local[d] + block_offset[d];
        }
        Generator generator(seed,
                            offset + testing::Ravel(global_index, global));
        mask.push_back(generator.NextUniformFloat() >= p ? 1.0 / (1.0 - p)
                                                         : 0.0);
      }
      const Tensor expected =
          *Mul(x, *Tensor::FromVector<double>(mask, block)->To(dtype));
      Tensor got = *Tensor::Empty(block, dtype);
      const StridedShape<1> positions =
          StridedShapeOf<1>(block, {global_strides});
      ForFloatingStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.numel(); ++i) {
          DropoutElement(static_cast<const T*>(x.raw_data()),
                         static_cast<T*>(got.raw_data()), positions, base, seed,
                         p, 1.0 / (1.0 - p), i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected)) << DTypeName(dtype) << " p " << p;
      if (p == 0.5) {
        int64_t zeros = 0;
        for (const double m : mask) zeros += m == 0;
        EXPECT_GT(zeros, 20);  // Of 60: the mask is not all ones.
        EXPECT_LT(zeros, 40);
      }
    }
  }
}

}  // namespace
}  // namespace dtensor::cuda
