#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_FA2_BACKWARD_BODY_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_FA2_BACKWARD_BODY_H_

// The lane-level arithmetic of the FlashAttention-2 backward on mma.sync
// (attention_fa2_backward.cu): the block's tiles, which rows the lanes give
// ldmatrix, the weights P and their gradients dS from a lane's accumulators,
// the causal step range and when a step needs the mask, and which output
// element each accumulator value is. The kernel and the CPU warp emulation
// (tests/tensor/attention_fa2_backward_test.cc) call these same functions.
//
// A block holds kFa2BackwardKeys keys (16 a warp, the M rows of its products)
// and walks steps of kFa2BackwardRows queries. Its warps compute S^T = K Q^T
// and dP^T = V dO^T, so that P^T and dS^T lie in the accumulators as the A
// operand of dV += P^T dO and dK += dS^T Q (AccumulatorTileOfA): no shared
// memory round trip for them; only dS^T goes to shared memory (the input
// type) for dQ += dS K, which needs every warp's keys.

#include <stdint.h>

#include <cmath>

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/mma_fragments.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

inline constexpr int kFa2BackwardWarps = 8;
inline constexpr int kFa2BackwardKeys = kMmaM * kFa2BackwardWarps;
inline constexpr int kFa2BackwardRows = 64;
// The n tiles of a warp's S^T (and dP^T): kFa2BackwardRows queries, 8 a tile.
inline constexpr int kFa2QueryTiles = kFa2BackwardRows / kMmaN;

// The row stride (elements) of a staged 16-bit tile `cols` wide: 16 bytes
// of padding, so that the 8 rows one ldmatrix matrix reads (row strides of
// 16 (cols / 8 + 1) bytes, cols a multiple of 64) start 16 bytes apart in
// the 128-byte bank cycle and the load is conflict-free; so are the lanes'
// 4-byte stores of dS^T (group g's row 4 g banks on).
DT_HOST_DEVICE constexpr int Fa2Stride(int cols) { return cols + 8; }

// The row and column, within a 16x16 tile, that `lane` addresses for
// ldmatrix.x4 when the four 8x8 matrices go down first (matrix i at rows
// 8 (i % 2), columns 8 (i / 2)): the A operand of a row-major [m][k] store,
// and, read .trans, the B operands of two n tiles (registers 0-1, 2-3) of a
// row-major [k][n] store.
DT_HOST_DEVICE constexpr FragmentElement LdMatrixDownFirst(int lane) {
  return {lane / 8 % 2 * 8 + lane % 8, lane / 16 * 8};
}

// Matrices across first (matrix i at rows 8 (i / 2), columns 8 (i % 2)): the
// B operands of two n tiles of a row-major [n][k] store (B = store^T), and,
// read .trans, the A operand of a row-major [k][m] store (A = store^T).
DT_HOST_DEVICE constexpr FragmentElement LdMatrixAcrossFirst(int lane) {
  return {lane / 16 * 8 + lane % 8, lane / 8 % 2 * 8};
}

// The problem as the lane arithmetic sees it.
struct Fa2Problem {
  int64_t lq;
  int64_t lk;
  bool causal;
  float scale;
};

// The first query that sees key `key` (lq when none does).
DT_HOST_DEVICE inline int64_t Fa2FirstQuery(const Fa2Problem& p, int64_t key) {
  if (!p.causal) return 0;
  // VisibleKeys(q) = q + (lk - lq) + 1 > key.
  const int64_t first = key - (p.lk - p.lq);
  return first < 0 ? 0 : (first > p.lq ? p.lq : first);
}

// Whether the step of queries [q0, q0 + kFa2BackwardRows) against the block's
// keys [k0, k0 + kFa2BackwardKeys) has a pair to mask: a query past lq, a key
// past lk or one the first (and so every later) query does not see.
DT_HOST_DEVICE inline bool Fa2StepNeedsMask(const Fa2Problem& p, int64_t q0,
                                            int64_t k0) {
  return q0 + kFa2BackwardRows > p.lq ||
         VisibleKeys(q0, p.lq, p.lk, p.causal) < k0 + kFa2BackwardKeys;
}

// This lane's S^T and dP^T accumulators (warp `warp`, keys k0 + 16 warp..,
// queries q0 + 8 j.. in tile j) become P^T = exp2(S scale log2e - lse log2e)
// and dS^T = P (dP - delta) scale, zeros where the query does not see the
// key (kMask; a step without a masked pair skips the test). lse_log2 and
// delta are the step's rows (lse already times log2e).
template <bool kMask>
DT_HOST_DEVICE inline void Fa2LaneWeights(const Fa2Problem& p, int64_t q0,
                                          int64_t k0, int warp, int lane,
                                          const float* lse_log2,
                                          const float* delta,
                                          float (&s)[kFa2QueryTiles][4],
                                          float (&dp)[kFa2QueryTiles][4]) {
  const float scale_log2 = p.scale * kFa2Log2e;
  for (int j = 0; j < kFa2QueryTiles; ++j) {
    for (int i = 0; i < 4; ++i) {
      const FragmentElement c = MmaCElement(lane, i);
      const int row = j * kMmaN + c.col;
      bool seen = true;
      if (kMask) {
        const int64_t query = q0 + row;
        seen = query < p.lq && k0 + warp * kMmaM + c.row <
                                   VisibleKeys(query, p.lq, p.lk, p.causal);
      }
      const float w = seen ? exp2f(s[j][i] * scale_log2 - lse_log2[row]) : 0.0f;
      s[j][i] = w;
      dp[j][i] = seen ? w * (dp[j][i] - delta[row]) * p.scale : 0.0f;
    }
  }
}

// Where, in the block's dS^T [kFa2BackwardKeys][Fa2Stride(kFa2BackwardRows)],
// this lane stores values 2 r and 2 r + 1 of its tile j (one 4-byte pair).
DT_HOST_DEVICE constexpr int Fa2DsIndex(int warp, int lane, int j, int r) {
  return (warp * kMmaM + MmaCElement(lane, 2 * r).row) *
             Fa2Stride(kFa2BackwardRows) +
         j * kMmaN + MmaCElement(lane, 2 * r).col;
}

// dQ of a step, [kFa2BackwardRows][d], by the warps: warp w the 16 rows
// 16 (w % 4).. and the Fa2DqCols(d) columns from Fa2DqCol0.
inline constexpr int kFa2DqRowBlocks = kFa2BackwardRows / kMmaM;
DT_HOST_DEVICE constexpr int Fa2DqCols(int d) {
  return d / (kFa2BackwardWarps / kFa2DqRowBlocks);
}
DT_HOST_DEVICE constexpr int Fa2DqRow0(int warp) {
  return warp % kFa2DqRowBlocks * kMmaM;
}
DT_HOST_DEVICE constexpr int Fa2DqCol0(int warp, int d) {
  return warp / kFa2DqRowBlocks * Fa2DqCols(d);
}

// The dQ element (row from q0, column) of this lane's value i of n tile j.
DT_HOST_DEVICE constexpr FragmentElement Fa2DqElement(int warp, int lane, int d,
                                                      int j, int i) {
  return {Fa2DqRow0(warp) + MmaCElement(lane, i).row,
          Fa2DqCol0(warp, d) + j * kMmaN + MmaCElement(lane, i).col};
}

// The dK (and dV) element (key from the block's k0, column) of this lane's
// value i of n tile j.
DT_HOST_DEVICE constexpr FragmentElement Fa2KeyElement(int warp, int lane,
                                                       int j, int i) {
  return {warp * kMmaM + MmaCElement(lane, i).row,
          j * kMmaN + MmaCElement(lane, i).col};
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_FA2_BACKWARD_BODY_H_
