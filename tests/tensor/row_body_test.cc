// The host forms of the CUDA row bodies (dtensor/tensor/cuda/row_body.h:
// softmax, the norms, cross entropy, reductions, rotary) against the CPU
// kernels of dtensor/tensor/: bit-exact where the math is the same (one lane
// visits a row in the CPU kernel's order), within stated tolerances where the
// order of a sum differs (several lanes, or the CPU's blocked reductions).
#include "dtensor/tensor/cuda/row_body.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/reduction.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_body_test_util.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::cuda::body_testing::Bytes;
using ::dtensor::cuda::body_testing::ForFloatingStorage;
using ::dtensor::cuda::body_testing::ForStorage;
using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomTensor;

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

// A target outside the row (the device reports it later) reads no logit:
// the loss is the row's log-sum-exp alone.
TEST(RowBodyTest, CrossEntropyOfAnOutOfRangeTargetReadsNoLogit) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f};
  const Row<float> row{logits.data(), 3, 1};
  const double max = LogSumExpMaxPartial(row, 0, 1);
  const double sum = LogSumExpSumPartial(row, max, 0, 1);
  const double logsumexp =
      std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0));
  for (int64_t target : {int64_t{-1}, int64_t{3}, int64_t{1} << 40}) {
    EXPECT_NEAR(CrossEntropyLoss(row, max, sum, target), logsumexp, 1e-6)
        << target;
  }
  EXPECT_NEAR(CrossEntropyLoss(row, max, sum, 2), logsumexp - 2.0, 1e-6);
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

}  // namespace
}  // namespace dtensor::cuda
