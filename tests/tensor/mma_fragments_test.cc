// The tensor-core fragment maps (dtensor/tensor/cuda/mma_fragments.h): each
// covers its matrix once, ldmatrix tiles land where the product reads its
// operands, two accumulator tiles are one A operand, and the emulated warp
// product is the matrix product (float64 reference).
#include "dtensor/tensor/cuda/mma_fragments.h"

#include <random>
#include <set>
#include <utility>

#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

using Cell = std::pair<int, int>;

Cell Of(FragmentElement e) { return {e.row, e.col}; }

TEST(MmaFragmentsTest, EachMapCoversItsMatrixOnce) {
  std::set<Cell> a, b, c, tile, tile_trans;
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int half = 0; half < 2; ++half) {
      for (int reg = 0; reg < 4; ++reg)
        a.insert(Of(MmaAElement(lane, reg, half)));
      for (int reg = 0; reg < 2; ++reg)
        b.insert(Of(MmaBElement(lane, reg, half)));
      tile.insert(Of(LdMatrixElement(lane, half, false)));
      tile_trans.insert(Of(LdMatrixElement(lane, half, true)));
    }
    for (int i = 0; i < 4; ++i) c.insert(Of(MmaCElement(lane, i)));
  }
  EXPECT_EQ(a.size(), size_t{kMmaM * kMmaK});
  EXPECT_EQ(b.size(), size_t{kMmaK * kMmaN});
  EXPECT_EQ(c.size(), size_t{kMmaM * kMmaN});
  EXPECT_EQ(tile.size(), 64u);
  EXPECT_EQ(tile_trans.size(), 64u);
  for (const auto& [row, col] : a) EXPECT_TRUE(row < kMmaM && col < kMmaK);
  for (const auto& [row, col] : b) EXPECT_TRUE(row < kMmaK && col < kMmaN);
  for (const auto& [row, col] : c) EXPECT_TRUE(row < kMmaM && col < kMmaN);
}

TEST(MmaFragmentsTest, TwoAccumulatorTilesAreOneAOperand) {
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int half = 0; half < 2; ++half) {
        const FragmentElement acc =
            MmaCElement(lane, AccumulatorValueOfA(reg, half));
        const FragmentElement a = MmaAElement(lane, reg, half);
        EXPECT_EQ(a.row, acc.row);
        EXPECT_EQ(a.col, acc.col + kMmaN * AccumulatorTileOfA(reg));
      }
    }
  }
}

// ldmatrix.x4 over a row-major [16][16] A with matrix i at rows 8 (i % 2),
// columns 8 (i / 2) gives register i of A; over K stored [n][k] (row-major,
// B = K^T) with matrix `reg` at columns 8 reg it gives B's register reg; over
// V stored [k][n] transposed, the same.
TEST(MmaFragmentsTest, LdMatrixTilesAreTheOperands) {
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int half = 0; half < 2; ++half) {
      const FragmentElement e = LdMatrixElement(lane, half, false);
      for (int reg = 0; reg < 4; ++reg) {
        const FragmentElement a = MmaAElement(lane, reg, half);
        EXPECT_EQ(a.row, e.row + 8 * (reg % 2));
        EXPECT_EQ(a.col, e.col + 8 * (reg / 2));
      }
      const FragmentElement t = LdMatrixElement(lane, half, true);
      for (int reg = 0; reg < 2; ++reg) {
        const FragmentElement b = MmaBElement(lane, reg, half);
        // K [n][k]: stored row e.row is n, column e.col is k.
        EXPECT_EQ(b.col, e.row);
        EXPECT_EQ(b.row, e.col + 8 * reg);
        // V [k][n] transposed: stored row t.row is k, column t.col is n.
        EXPECT_EQ(b.row, t.row + 8 * reg);
        EXPECT_EQ(b.col, t.col);
      }
    }
  }
}

TEST(MmaFragmentsTest, EmulatedProductIsTheMatrixProduct) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1, 1);
  double a[kMmaM][kMmaK], b[kMmaK][kMmaN], c[kMmaM][kMmaN];
  for (auto& row : a)
    for (double& x : row) x = value(rng);
  for (auto& row : b)
    for (double& x : row) x = value(rng);
  for (auto& row : c)
    for (double& x : row) x = value(rng);
  float lanes_a[kWarpLanes][4][2], lanes_b[kWarpLanes][2][2];
  float lanes_d[kWarpLanes][4];
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int half = 0; half < 2; ++half) {
      for (int reg = 0; reg < 4; ++reg) {
        const FragmentElement e = MmaAElement(lane, reg, half);
        lanes_a[lane][reg][half] = static_cast<float>(a[e.row][e.col]);
      }
      for (int reg = 0; reg < 2; ++reg) {
        const FragmentElement e = MmaBElement(lane, reg, half);
        lanes_b[lane][reg][half] = static_cast<float>(b[e.row][e.col]);
      }
    }
    for (int i = 0; i < 4; ++i) {
      const FragmentElement e = MmaCElement(lane, i);
      lanes_d[lane][i] = static_cast<float>(c[e.row][e.col]);
    }
  }
  EmulateMma(lanes_a, lanes_b, lanes_d);
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const FragmentElement e = MmaCElement(lane, i);
      double expected = c[e.row][e.col];
      for (int k = 0; k < kMmaK; ++k) expected += a[e.row][k] * b[k][e.col];
      EXPECT_NEAR(lanes_d[lane][i], expected, 1e-5) << lane << " " << i;
    }
  }
}

}  // namespace
}  // namespace dtensor::cuda
