// The FlashAttention-2 backward on mma.sync (tensor/cuda/
// attention_fa2_backward.cu) run on the host as a warp emulation: each
// block's 8 warps as arrays of their 32 lanes' registers, every ldmatrix by
// its documented element map (LdMatrixElement) from the addresses the kernel
// gives (LdMatrixDownFirst, LdMatrixAcrossFirst), every product by
// EmulateMma, and the lane arithmetic by the bodies the kernel calls
// (attention_fa2_backward_body.h): the steps a key block walks, the weights
// and the mask, where dS^T is stored, which lane adds which dq, dk, dv
// element. dq, dk, dv are checked against a float64 backward from the
// attention's definition (softmax of the scaled scores over the keys a query
// sees, bottom-right causal), with grouped-query heads (4 query heads on 2 kv
// heads), lengths off the tiles, lq != lk (causal rows that see no key),
// head dims 16 to 128 (64 and 128 compiled), causal and not.
//
// Two roundings: none (the emulation then differs from float64 only by f32
// sums: within 1e-4 of the largest magnitude) and bf16 for the inputs and
// for P and dS before their products, as on the device (within 3e-2).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dtensor/tensor/cuda/attention_fa2_backward_body.h"
#include "dtensor/tensor/cuda/mma_fragments.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/attention_case.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::testing::kAttentionEntries;
using ::dtensor::testing::kAttentionGroup;
using ::dtensor::testing::kAttentionKvHeads;
using Case = ::dtensor::testing::AttentionCase;

using Round = float (*)(float);

float Exact(float x) { return x; }

// To the nearest bf16 (ties to even); the test's values are finite.
float Bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// q, dout [entries][lq][e]; k, v [kv heads][lk][e] (attention_case.h); the
// forward's lse and delta [entries][lq] (f32, as the device gets them); the
// float64 gradients.
struct Problem {
  std::vector<float> q, k, v, dout, lse, delta;
  std::vector<double> dq, dk, dv;
};

// The float64 attention of one entry's query row: its weights (0 for a key
// it does not see), out and lse (-inf for no key).
void ReferenceRow(const Case& c, float scale, const float* q, const float* k,
                  const float* v, int64_t query, std::vector<double>& p,
                  std::vector<double>& out, double& lse) {
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < c.lk; ++j) {
    double s = 0;
    for (int d = 0; d < c.e; ++d) s += double{q[d]} * k[j * c.e + d];
    p[j] = c.Sees(query, j) ? s * scale : -HUGE_VAL;
    top = std::max(top, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < c.lk; ++j) {
    p[j] = p[j] == -HUGE_VAL ? 0.0 : std::exp(p[j] - top);
    sum += p[j];
  }
  std::fill(out.begin(), out.end(), 0.0);
  for (int64_t j = 0; j < c.lk; ++j) {
    p[j] = sum == 0 ? 0.0 : p[j] / sum;
    for (int d = 0; d < c.e; ++d) out[d] += p[j] * v[j * c.e + d];
  }
  lse = sum == 0 ? -HUGE_VAL : top + std::log(sum);
}

// Draws the operands (rounded) and fills lse, delta and the float64
// gradients: dP = dO V^T, dS = P (dP - rowsum(dO * O)), dq = scale dS K,
// dk = scale dS^T Q, dv = P^T dO.
Problem Draw(const Case& c, float scale, Round round, std::mt19937& rng) {
  std::normal_distribution<float> normal(0, 1);
  Problem o;
  const auto fill = [&](std::vector<float>& x, int64_t n) {
    x.resize(n);
    for (float& value : x) value = round(normal(rng));
  };
  fill(o.q, kAttentionEntries * c.lq * c.e);
  fill(o.dout, kAttentionEntries * c.lq * c.e);
  fill(o.k, kAttentionKvHeads * c.lk * c.e);
  fill(o.v, kAttentionKvHeads * c.lk * c.e);
  o.lse.assign(kAttentionEntries * c.lq, 0.0f);
  o.delta.assign(kAttentionEntries * c.lq, 0.0f);
  o.dq.assign(o.q.size(), 0.0);
  o.dk.assign(o.k.size(), 0.0);
  o.dv.assign(o.v.size(), 0.0);
  std::vector<double> p(c.lk), out(c.e);
  for (int x = 0; x < kAttentionEntries; ++x) {
    const int64_t kv = x / kAttentionGroup * c.lk * c.e;
    for (int64_t i = 0; i < c.lq; ++i) {
      const int64_t row = (x * c.lq + i) * c.e;
      double lse = 0;
      ReferenceRow(c, scale, &o.q[row], &o.k[kv], &o.v[kv], i, p, out, lse);
      double delta = 0;
      for (int d = 0; d < c.e; ++d) delta += out[d] * o.dout[row + d];
      o.lse[x * c.lq + i] = static_cast<float>(lse);
      o.delta[x * c.lq + i] = static_cast<float>(delta);
      for (int64_t j = 0; j < c.lk; ++j) {
        double dp = 0;
        for (int d = 0; d < c.e; ++d) {
          dp += double{o.dout[row + d]} * o.v[kv + j * c.e + d];
        }
        const double ds = p[j] * (dp - delta) * scale;
        for (int d = 0; d < c.e; ++d) {
          o.dq[row + d] += ds * o.k[kv + j * c.e + d];
          o.dk[kv + j * c.e + d] += ds * o.q[row + d];
          o.dv[kv + j * c.e + d] += p[j] * o.dout[row + d];
        }
      }
    }
  }
  return o;
}

using ARegs = float[kWarpLanes][4][2];
using BRegs = float[kWarpLanes][2][2];
using At = FragmentElement (*)(int);

// A staged 16-bit tile on the host: [rows][Fa2Stride(cols)], zeros past the
// operand's rows and columns, as StageAsync leaves it.
struct Tile {
  int stride;
  std::vector<float> x;
  Tile(int rows, int cols) : stride(Fa2Stride(cols)), x(rows * stride, 0.0f) {}
  float* Row(int r) { return &x[r * stride]; }
};

void Stage(Tile& t, const float* src, int64_t rows, int64_t capacity,
           int64_t e) {
  std::fill(t.x.begin(), t.x.end(), 0.0f);
  for (int64_t r = 0; r < std::min(rows, capacity); ++r) {
    std::copy(src + r * e, src + (r + 1) * e, t.Row(r));
  }
}

// ldmatrix.x4 (.trans with `trans`): lane l gives the row at(l) from
// (row0, col0) of t; register i of every lane gets matrix i's element by
// LdMatrixElement, matrix i's row r being what lane 8 i + r gave.
void LdMatrixX4(const Tile& t, int row0, int col0, At at, bool trans,
                ARegs& r) {
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int half = 0; half < 2; ++half) {
        const FragmentElement e = LdMatrixElement(lane, half, trans);
        const FragmentElement row = at(8 * reg + e.row);
        r[lane][reg][half] =
            t.x[(row0 + row.row) * t.stride + col0 + row.col + e.col];
      }
    }
  }
}

// d (n tiles `tile` and `tile` + 1 of the lanes' accumulators acc(lane))
// += a times the two B operands of r (registers 0-1 and 2-3).
void Mma2(const ARegs& a, const ARegs& r,
          const std::function<float*(int, int)>& acc, int tile) {
  for (int n = 0; n < 2; ++n) {
    BRegs b;
    float d[kWarpLanes][4];
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int reg = 0; reg < 2; ++reg) {
        for (int half = 0; half < 2; ++half) {
          b[lane][reg][half] = r[lane][2 * n + reg][half];
        }
      }
      std::copy(acc(lane, tile + n), acc(lane, tile + n) + 4, d[lane]);
    }
    EmulateMma(a, b, d);
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      std::copy(d[lane], d[lane] + 4, acc(lane, tile + n));
    }
  }
}

using StepAcc = float[kWarpLanes][kFa2QueryTiles][4];

// TransposedScores: acc = rows_m [16 warp..][d] rows_n [kFa2BackwardRows][d]^T.
void TransposedScores(const Tile& rows_m, const Tile& rows_n, int warp, int d,
                      StepAcc& acc) {
  for (int kk = 0; kk < d; kk += kMmaK) {
    ARegs a, b;
    LdMatrixX4(rows_m, warp * kMmaM, kk, LdMatrixDownFirst, false, a);
    for (int j = 0; j < kFa2QueryTiles; j += 2) {
      LdMatrixX4(rows_n, j * kMmaN, kk, LdMatrixAcrossFirst, false, b);
      Mma2(
          a, b, [&](int lane, int tile) { return acc[lane][tile]; }, j);
    }
  }
}

// The lanes' [16 keys][d] accumulators of one warp (dk or dv).
using KeyAcc = std::vector<float>;  // [lane][d / 8][4]

// AddWeightedRows: acc += round(w)^T-as-A rows [kFa2BackwardRows][d].
void AddWeightedRows(const StepAcc& w, const Tile& rows, int d, Round round,
                     KeyAcc& acc) {
  const int tiles = d / kMmaN;
  for (int kq = 0; kq < kFa2BackwardRows / kMmaK; ++kq) {
    ARegs a, b;
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int reg = 0; reg < 4; ++reg) {
        for (int half = 0; half < 2; ++half) {
          a[lane][reg][half] = round(w[lane][2 * kq + AccumulatorTileOfA(reg)]
                                      [AccumulatorValueOfA(reg, half)]);
        }
      }
    }
    for (int dd = 0; dd < d; dd += 2 * kMmaN) {
      LdMatrixX4(rows, kq * kMmaK, dd, LdMatrixDownFirst, true, b);
      Mma2(
          a, b,
          [&](int lane, int tile) { return &acc[(lane * tiles + tile) * 4]; },
          dd / kMmaN);
    }
  }
}

// The emulated block's state over its steps.
struct Block {
  const Case& c;
  const Fa2Problem p;
  const int d;
  const Round round;
  Tile k, v, q, dout, ds;
  std::vector<float> lse_log2, delta;
  std::vector<KeyAcc> dk, dv;  // [warp]

  Block(const Case& c, float scale, Round round)
      : c(c),
        p{c.lq, c.lk, c.causal, scale},
        d(c.e <= 64 ? 64 : 128),
        round(round),
        k(kFa2BackwardKeys, d),
        v(kFa2BackwardKeys, d),
        q(kFa2BackwardRows, d),
        dout(kFa2BackwardRows, d),
        ds(kFa2BackwardKeys, kFa2BackwardRows),
        lse_log2(kFa2BackwardRows),
        delta(kFa2BackwardRows) {}
};

// One warp's part of a step before the block's barrier: weights, dk, dv,
// and its dS^T into the block's tile.
void WarpStep(Block& b, int64_t q0, int64_t k0, int warp) {
  StepAcc s, dp;
  std::memset(s, 0, sizeof(s));
  std::memset(dp, 0, sizeof(dp));
  TransposedScores(b.k, b.q, warp, b.d, s);
  TransposedScores(b.v, b.dout, warp, b.d, dp);
  const bool mask = Fa2StepNeedsMask(b.p, q0, k0);
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    if (mask) {
      Fa2LaneWeights<true>(b.p, q0, k0, warp, lane, b.lse_log2.data(),
                           b.delta.data(), s[lane], dp[lane]);
    } else {
      Fa2LaneWeights<false>(b.p, q0, k0, warp, lane, b.lse_log2.data(),
                            b.delta.data(), s[lane], dp[lane]);
    }
  }
  AddWeightedRows(s, b.dout, b.d, b.round, b.dv[warp]);
  AddWeightedRows(dp, b.q, b.d, b.round, b.dk[warp]);
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int j = 0; j < kFa2QueryTiles; ++j) {
      for (int r = 0; r < 2; ++r) {
        for (int half = 0; half < 2; ++half) {
          b.ds.x[Fa2DsIndex(warp, lane, j, r) + half] =
              b.round(dp[lane][j][2 * r + half]);
        }
      }
    }
  }
}

// AddQueryGrads: dq (the step's first row) += dS K for warp's tile.
void AddQueryGrads(Block& b, float* dq, int64_t rows, int warp) {
  const int tiles = Fa2DqCols(b.d) / kMmaN;
  const int row0 = Fa2DqRow0(warp);
  const int col0 = Fa2DqCol0(warp, b.d);
  if (row0 >= rows || col0 >= b.c.e) return;
  std::vector<float> acc(kWarpLanes * tiles * 4, 0.0f);
  const auto at = [&](int lane, int tile) {
    return &acc[(lane * tiles + tile) * 4];
  };
  for (int kk = 0; kk < kFa2BackwardKeys; kk += kMmaK) {
    ARegs a, r;
    LdMatrixX4(b.ds, kk, row0, LdMatrixAcrossFirst, true, a);
    for (int j = 0; j < tiles; j += 2) {
      LdMatrixX4(b.k, kk, col0 + j * kMmaN, LdMatrixDownFirst, true, r);
      Mma2(a, r, at, j);
    }
  }
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int j = 0; j < tiles; ++j) {
      for (int i = 0; i < 4; ++i) {
        const FragmentElement e = Fa2DqElement(warp, lane, b.d, j, i);
        if (e.row < rows && e.col < b.c.e) {
          dq[e.row * b.c.e + e.col] += at(lane, j)[i];
        }
      }
    }
  }
}

// AddKeyGrads: dst (the block's first key) += the warps' accumulators.
void AddKeyGrads(const Block& b, const std::vector<KeyAcc>& acc, float* dst,
                 int64_t keys) {
  const int tiles = b.d / kMmaN;
  for (int warp = 0; warp < kFa2BackwardWarps; ++warp) {
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int j = 0; j < tiles; ++j) {
        for (int i = 0; i < 4; ++i) {
          const FragmentElement e = Fa2KeyElement(warp, lane, j, i);
          if (e.row < keys && e.col < b.c.e) {
            dst[e.row * b.c.e + e.col] += acc[warp][(lane * tiles + j) * 4 + i];
          }
        }
      }
    }
  }
}

// The kernel's block (entry, k0), adding into dq, dk, dv.
void RunBlock(Block& b, const Problem& o, int entry, int64_t k0,
              std::vector<float>& dq, std::vector<float>& dk,
              std::vector<float>& dv) {
  const Case& c = b.c;
  const int64_t first = Fa2FirstQuery(b.p, k0);
  if (first >= c.lq) return;
  const int64_t kv = (entry / kAttentionGroup * c.lk + k0) * c.e;
  Stage(b.k, &o.k[kv], c.lk - k0, kFa2BackwardKeys, c.e);
  Stage(b.v, &o.v[kv], c.lk - k0, kFa2BackwardKeys, c.e);
  b.dk.assign(kFa2BackwardWarps, KeyAcc(kWarpLanes * b.d / kMmaN * 4, 0.0f));
  b.dv = b.dk;
  for (int64_t q0 = first; q0 < c.lq; q0 += kFa2BackwardRows) {
    const int64_t row0 = entry * c.lq + q0;
    const int64_t rows = c.lq - q0;
    Stage(b.q, &o.q[row0 * c.e], rows, kFa2BackwardRows, c.e);
    Stage(b.dout, &o.dout[row0 * c.e], rows, kFa2BackwardRows, c.e);
    for (int i = 0; i < kFa2BackwardRows; ++i) {
      b.lse_log2[i] = i < rows ? o.lse[row0 + i] * kFa2Log2e : 0.0f;
      b.delta[i] = i < rows ? o.delta[row0 + i] : 0.0f;
    }
    for (int warp = 0; warp < kFa2BackwardWarps; ++warp)
      WarpStep(b, q0, k0, warp);
    for (int warp = 0; warp < kFa2BackwardWarps; ++warp) {
      AddQueryGrads(b, &dq[row0 * c.e], rows, warp);
    }
  }
  AddKeyGrads(b, b.dk, &dk[kv], c.lk - k0);
  AddKeyGrads(b, b.dv, &dv[kv], c.lk - k0);
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double fraction, const std::string& what) {
  // At least 1, the operands' scale: a gradient that is 0 exactly (one key:
  // dP - delta = 0) is compared with the f32 sums' error at that scale.
  double largest = 1;
  for (double x : want) largest = std::max(largest, std::abs(x));
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t x = 0; x < got.size(); ++x) {
    ASSERT_NEAR(got[x], want[x], fraction * largest) << what << " at " << x;
  }
}

void CheckCase(const Case& c, Round round, double fraction, std::mt19937& rng) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.e));
  const Problem o = Draw(c, scale, round, rng);
  std::vector<float> dq(o.q.size(), 0.0f), dk(o.k.size(), 0.0f),
      dv(o.v.size(), 0.0f);
  Block b(c, scale, round);
  for (int entry = 0; entry < kAttentionEntries; ++entry) {
    for (int64_t k0 = 0; k0 < c.lk; k0 += kFa2BackwardKeys) {
      RunBlock(b, o, entry, k0, dq, dk, dv);
    }
  }
  ExpectNear(dq, o.dq, fraction, c.Name() + " dq");
  ExpectNear(dk, o.dk, fraction, c.Name() + " dk");
  ExpectNear(dv, o.dv, fraction, c.Name() + " dv");
}

// `dtype` names the rounding a test applies (f32: none).
std::vector<Case> Cases(DType dtype) {
  std::vector<Case> cases;
  for (const bool causal : {false, true}) {
    cases.push_back({dtype, causal, 1, 1, 64});
    cases.push_back({dtype, causal, 37, 37, 16});
    cases.push_back({dtype, causal, 130, 257, 128});
    cases.push_back({dtype, causal, 257, 130, 80});
    cases.push_back({dtype, causal, 70, 3, 64});
    // Causal: a step off the diagonal (q0 192 on the first key block).
    cases.push_back({dtype, causal, 260, 250, 64});
  }
  return cases;
}

TEST(AttentionFa2BackwardTest, ExactEmulationMatchesFloat64) {
  std::mt19937 rng(11);
  for (const Case& c : Cases(DType::kF32)) CheckCase(c, Exact, 1e-4, rng);
}

TEST(AttentionFa2BackwardTest, Bf16EmulationMatchesFloat64) {
  std::mt19937 rng(12);
  for (const Case& c : Cases(DType::kBF16)) CheckCase(c, Bf16, 3e-2, rng);
}

// The causal step range: a key block's first step is the first query that
// sees its first key, and a step needs the mask exactly when one of its
// pairs is not seen (brute force over the pairs).
TEST(AttentionFa2BackwardTest, StepRangesAndMasks) {
  for (const Case& c : Cases(DType::kF32)) {
    const Fa2Problem p{c.lq, c.lk, c.causal, 1.0f};
    for (int64_t k0 = 0; k0 < c.lk; k0 += kFa2BackwardKeys) {
      int64_t first = c.lq;
      for (int64_t i = c.lq - 1; i >= 0; --i) {
        if (c.Sees(i, k0)) first = i;
      }
      EXPECT_EQ(Fa2FirstQuery(p, k0), first) << c.Name();
      for (int64_t q0 = first; q0 < c.lq; q0 += kFa2BackwardRows) {
        bool masked = false;
        for (int64_t i = q0; i < q0 + kFa2BackwardRows; ++i) {
          for (int64_t j = k0; j < k0 + kFa2BackwardKeys; ++j) {
            masked |= i >= c.lq || j >= c.lk || !c.Sees(i, j);
          }
        }
        EXPECT_EQ(Fa2StepNeedsMask(p, q0, k0), masked) << c.Name() << q0;
      }
    }
  }
}

}  // namespace
}  // namespace dtensor::cuda
