// The register-resident tensor-core attention forward
// (dtensor/tensor/cuda/attention_fa2_forward.cu) run on the host as a warp
// emulation: the block's swizzled shared tiles as arrays, ldmatrix by the
// lanes' addresses (Fa2ARow, Fa2KRow) and the fragment maps
// (LdMatrixElement), the products by EmulateMma, the quad shuffles across the
// 32 lanes' register arrays, and every lane-level step by the bodies the
// kernel calls (attention_fa2_body.h). Compared with the float64 reference
// (reference_attention.h): bf16 and f16, causal and not, grouped-query heads
// (4 query heads over 2 kv heads), head dims 16, 64, 80 and 128, lengths off
// the tiles and lq != lk (causal rows that see no key included).
//
// Tolerances, against the reference of the same rounded inputs: outputs
// within a fraction of their largest magnitude, 1e-2 for bf16 and 2e-3 for
// f16 (P is rounded to the input type before P V, as on the device, and the
// output to the input type); the log-sum-exps (f32 throughout) within
// 1e-4 (1 + |lse|).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dtensor/tensor/cuda/attention_fa2_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/mma_fragments.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/attention_case.h"
#include "tests/tensor/reference_attention.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::testing::kAttentionEntries;
using ::dtensor::testing::kAttentionGroup;
using Case = ::dtensor::testing::AttentionCase;

using Lanes4 = float[kWarpLanes][4];
using ARegs = float[kWarpLanes][4][2];
using BRegs = float[kWarpLanes][2][2];

// A shared tile [rows][D], swizzled as the kernel's.
template <int D>
struct Tile {
  static constexpr int kChunks = D / kFa2Chunk;
  std::vector<float> values;

  explicit Tile(int rows) : values(static_cast<size_t>(rows) * D, 0.0f) {}

  // Rows [0, rows) of src (row stride e), zeros past them and past column e
  // (LoadTile's cp.async with its zero fill).
  void Stage(const float* src, int64_t rows, int64_t e) {
    const int64_t tile_rows = static_cast<int64_t>(values.size()) / D;
    for (int64_t r = 0; r < tile_rows; ++r) {
      for (int c = 0; c < kChunks; ++c) {
        const bool valid = r < rows && c * kFa2Chunk < e;
        for (int j = 0; j < kFa2Chunk; ++j) {
          values[Fa2SwizzledOffset<kChunks>(static_cast<int>(r), c) + j] =
              valid ? src[r * e + c * kFa2Chunk + j] : 0.0f;
        }
      }
    }
  }

  // ldmatrix.x4 (.trans with `trans`): lane l gives the row row_of(l).
  template <typename RowOf>
  void LdMatrixX4(RowOf row_of, bool trans, ARegs& r) const {
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int i = 0; i < 4; ++i) {
        for (int half = 0; half < 2; ++half) {
          const FragmentElement e = LdMatrixElement(lane, half, trans);
          const Fa2LdRow at = row_of(i * 8 + e.row);
          r[lane][i][half] =
              values[Fa2SwizzledOffset<kChunks>(at.row, at.chunk) + e.col];
        }
      }
    }
  }
};

// Registers 0, 1 (first) or 2, 3 of an ldmatrix.x4 as a B operand.
void SplitB(const ARegs& r, bool second, BRegs& b) {
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int reg = 0; reg < 2; ++reg) {
      for (int half = 0; half < 2; ++half) {
        b[lane][reg][half] = r[lane][2 * second + reg][half];
      }
    }
  }
}

// d[lane][tile] += a b, as MmaInput<H>::Mma on the lanes' accumulators.
template <int kTiles>
void MmaInto(const ARegs& a, const BRegs& b, float (&d)[kWarpLanes][kTiles][4],
             int tile) {
  Lanes4 acc;
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int i = 0; i < 4; ++i) acc[lane][i] = d[lane][tile][i];
  }
  EmulateMma(a, b, acc);
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int i = 0; i < 4; ++i) d[lane][tile][i] = acc[lane][i];
  }
}

// The lanes' x combined over each quad (the shuffles over lanes ^ 1, ^ 2).
template <typename Combine>
void OverQuads(float (&x)[kWarpLanes][2], Combine combine) {
  for (int quad = 0; quad < kWarpLanes; quad += 4) {
    for (int h = 0; h < 2; ++h) {
      float total = x[quad][h];
      for (int l = 1; l < 4; ++l) total = combine(total, x[quad + l][h]);
      for (int l = 0; l < 4; ++l) x[quad + l][h] = total;
    }
  }
}

// The value a register holds once rounded to the input type.
float Round(DType dtype, float x) {
  return dtype == DType::kBF16 ? ToFloat(ToBf16(x)) : ToFloat(ToF16(x));
}

// One warp of the kernel (Fa2WarpState and its steps).
template <int D>
struct Warp {
  static constexpr int kQk = D / kMmaK;
  static constexpr int kOut = D / kMmaN;
  ARegs q[kQk];
  float o[kWarpLanes][kOut][4] = {};
  Fa2RowState rows[kWarpLanes];
  Fa2WarpKeys keys[kWarpLanes];
  int64_t query0;

  Warp(int64_t q0, int warp, int64_t lq, int64_t lk, bool causal)
      : query0(q0 + warp * kMmaM) {
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      rows[lane] = Fa2InitialState();
      keys[lane] = Fa2KeysOfWarp(query0, lane, lq, lk, causal);
    }
  }

  void LoadQuery(const Tile<D>& sq, int warp) {
    for (int kk = 0; kk < kQk; ++kk) {
      sq.LdMatrixX4([&](int l) { return Fa2ARow(l, warp * kMmaM, 2 * kk); },
                    false, q[kk]);
    }
  }

  // ScoreTile.
  void Scores(const Tile<D>& sk, float (&s)[kWarpLanes][kFa2KeyTiles][4]) {
    for (auto& lane : s) {
      for (auto& tile : lane) std::fill(tile, tile + 4, 0.0f);
    }
    for (int kk = 0; kk < kQk; ++kk) {
      for (int np = 0; np < kFa2KeyTiles / 2; ++np) {
        ARegs r;
        sk.LdMatrixX4([&](int l) { return Fa2KRow(l, np * 2 * kMmaN, 2 * kk); },
                      false, r);
        BRegs b;
        for (int second = 0; second < 2; ++second) {
          SplitB(r, second, b);
          MmaInto(q[kk], b, s, 2 * np + second);
        }
      }
    }
  }

  // AddValues.
  void AddValues(const float (&p)[kWarpLanes][kFa2KeyTiles][4],
                 const Tile<D>& sv, DType dtype) {
    for (int kk = 0; kk < kFa2ForwardKeys / kMmaK; ++kk) {
      ARegs a;
      for (int lane = 0; lane < kWarpLanes; ++lane) {
        for (int reg = 0; reg < 4; ++reg) {
          for (int half = 0; half < 2; ++half) {
            a[lane][reg][half] =
                Round(dtype, Fa2PValue(p[lane], kk, reg, half));
          }
        }
      }
      for (int dp = 0; dp < D / (2 * kMmaN); ++dp) {
        ARegs r;
        sv.LdMatrixX4([&](int l) { return Fa2ARow(l, kk * kMmaK, 2 * dp); },
                      true, r);
        BRegs b;
        for (int second = 0; second < 2; ++second) {
          SplitB(r, second, b);
          MmaInto(a, b, o, 2 * dp + second);
        }
      }
    }
  }

  // WarpStep.
  void Step(const Tile<D>& sk, const Tile<D>& sv, int64_t key0, float scale,
            DType dtype) {
    float s[kWarpLanes][kFa2KeyTiles][4];
    Scores(sk, s);
    float top[kWarpLanes][2];
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      if (Fa2TileNeedsMask(key0, keys[lane].first)) {
        Fa2MaskScores(s[lane], lane, key0, keys[lane].visible);
      }
      Fa2LaneMax(s[lane], top[lane]);
    }
    OverQuads(top, [](float x, float y) { return std::max(x, y); });
    const float scale_log2 = static_cast<float>(double{scale} * kFa2Log2e);
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      float correction[2];
      Fa2SoftmaxStep(s[lane], top[lane], scale_log2, rows[lane], correction);
      Fa2Rescale(o[lane], correction);
    }
    AddValues(s, sv, dtype);
  }

  // WriteRows: out [lq][e] and lse [lq] of the warp's entry.
  void Write(int64_t lq, int64_t e, float scale, DType dtype, float* out,
             float* lse) const {
    float total[kWarpLanes][2];
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int h = 0; h < 2; ++h) total[lane][h] = rows[lane].sum[h];
    }
    OverQuads(total, [](float x, float y) { return x + y; });
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int h = 0; h < 2; ++h) {
        const Fa2RowEnd end =
            Fa2FinishRow(rows[lane].max[h], total[lane][h], scale);
        const FragmentElement at = MmaCElement(lane, 2 * h);
        const int64_t query = query0 + at.row;
        if (query >= lq) continue;
        if (lane % 4 == 0) lse[query] = end.lse;
        for (int n = 0; n < kOut; ++n) {
          for (int j = 0; j < 2; ++j) {
            const int64_t col = n * kMmaN + at.col + j;
            if (col >= e) continue;
            out[query * e + col] =
                Round(dtype, o[lane][n][2 * h + j] * end.inverse);
          }
        }
      }
    }
  }
};

// q [entries, lq, e]; k and v [kv heads, lk, e] (attention_case.h).
struct HostOperands {
  std::vector<float> q, k, v;
};

// The emulated kernel over every block: out [entries, lq, e], lse.
template <int D>
void EmulateForward(const Case& c, const HostOperands& in, float scale,
                    std::vector<float>& out, std::vector<float>& lse) {
  out.assign(kAttentionEntries * c.lq * c.e, NAN);
  lse.assign(kAttentionEntries * c.lq, NAN);
  for (int64_t entry = 0; entry < kAttentionEntries; ++entry) {
    const int64_t kv = entry / kAttentionGroup * c.lk * c.e;
    for (int64_t q0 = 0; q0 < c.lq; q0 += kFa2ForwardRows) {
      const int64_t rows = std::min<int64_t>(kFa2ForwardRows, c.lq - q0);
      Tile<D> sq(kFa2ForwardRows), sk(kFa2ForwardKeys), sv(kFa2ForwardKeys);
      sq.Stage(in.q.data() + (entry * c.lq + q0) * c.e, rows, c.e);
      std::vector<Warp<D>> warps;
      for (int w = 0; w < kFa2ForwardWarps; ++w) {
        warps.emplace_back(q0, w, c.lq, c.lk, c.causal);
        warps.back().LoadQuery(sq, w);
      }
      const int64_t end = Fa2KeyEnd(q0, rows, c.lq, c.lk, c.causal);
      for (int64_t key0 = 0; key0 < end; key0 += kFa2ForwardKeys) {
        const int64_t n = std::min<int64_t>(kFa2ForwardKeys, c.lk - key0);
        sk.Stage(in.k.data() + kv + key0 * c.e, n, c.e);
        sv.Stage(in.v.data() + kv + key0 * c.e, n, c.e);
        for (Warp<D>& w : warps) {
          if (key0 < w.keys[0].end) w.Step(sk, sv, key0, scale, c.dtype);
        }
      }
      for (const Warp<D>& w : warps) {
        if (w.query0 >= c.lq) continue;
        w.Write(c.lq, c.e, scale, c.dtype, out.data() + entry * c.lq * c.e,
                lse.data() + entry * c.lq);
      }
    }
  }
}

std::vector<float> Values(const Tensor& t) {
  const std::vector<double> d = t.To(DType::kF64)->ToVector<double>().value();
  return std::vector<float>(d.begin(), d.end());
}

void CheckCase(const Case& c, std::mt19937& rng) {
  const testing::AttentionOperands o = testing::DrawAttentionOperands(c, rng);
  const double scale = c.Scale();
  const testing::AttentionReference ref =
      testing::ReferenceAttention(o.q, o.k, o.v, Tensor(), c.causal, scale);
  const HostOperands in{Values(o.q), Values(o.k), Values(o.v)};
  std::vector<float> out, lse;
  if (c.e <= 64) {
    EmulateForward<64>(c, in, static_cast<float>(scale), out, lse);
  } else {
    EmulateForward<128>(c, in, static_cast<float>(scale), out, lse);
  }
  ASSERT_EQ(out.size(), ref.out.size()) << c.Name();
  double largest = 1e-3;
  for (const double x : ref.out) largest = std::max(largest, std::abs(x));
  const double bound = (c.dtype == DType::kBF16 ? 1e-2 : 2e-3) * largest;
  int failures = 0;
  for (size_t i = 0; i < out.size() && failures < 5; ++i) {
    if (!(std::abs(out[i] - ref.out[i]) <= bound)) {
      ++failures;
      ADD_FAILURE() << c.Name() << " out [" << i << "]: " << out[i] << " vs "
                    << ref.out[i] << " (bound " << bound << ")";
    }
  }
  const std::vector<double>& expected = ref.lse;
  for (size_t i = 0; i < lse.size() && failures < 5; ++i) {
    const bool ok = std::isinf(expected[i])
                        ? lse[i] == expected[i]
                        : std::abs(lse[i] - expected[i]) <=
                              1e-4 * (1 + std::abs(expected[i]));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << c.Name() << " lse [" << i << "]: " << lse[i] << " vs "
                    << expected[i];
    }
  }
}

TEST(AttentionFa2ForwardTest, WarpEmulationMatchesTheReference) {
  std::mt19937 rng(11);
  for (const Case& c : testing::TensorCoreAttentionCases(
           {{1, 1}, {37, 37}, {130, 257}, {257, 130}, {37, 1}, {64, 128}})) {
    CheckCase(c, rng);
  }
}

// The 8 rows that one ldmatrix matrix reads (the same chunk of 8 consecutive
// rows) fall in 8 distinct 16-byte bank groups of the 128-byte bank cycle,
// and the swizzle maps a tile's chunks one to one.
template <int D>
void CheckSwizzle() {
  constexpr int kChunks = D / kFa2Chunk;
  std::vector<int> hits(kFa2ForwardKeys * kChunks, 0);
  for (int row = 0; row < kFa2ForwardKeys; ++row) {
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      ++hits[Fa2SwizzledOffset<kChunks>(row, chunk) / kFa2Chunk];
    }
  }
  for (const int h : hits) ASSERT_EQ(h, 1) << "D " << D;
  for (int row0 = 0; row0 < kFa2ForwardKeys; row0 += 8) {
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      std::vector<bool> used(8, false);
      for (int r = 0; r < 8; ++r) {
        const int group =
            Fa2SwizzledOffset<kChunks>(row0 + r, chunk) / kFa2Chunk % 8;
        EXPECT_FALSE(used[group]) << "D " << D << " row " << row0 + r;
        used[group] = true;
      }
    }
  }
}

TEST(AttentionFa2ForwardTest, SwizzleIsABijectionWithoutBankConflicts) {
  CheckSwizzle<64>();
  CheckSwizzle<128>();
}

}  // namespace
}  // namespace dtensor::cuda
