#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_FA2_BODY_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_FA2_BODY_H_

// The lane-level math of the register-resident tensor-core attention forward
// (attention_fa2_forward.cu): where a lane's ldmatrix rows lie in the
// swizzled shared tiles, which key tiles a warp walks and which it masks, the
// online softmax of the lane's score accumulators, and which score becomes
// which element of P (the A operand of P V). The kernel calls these with its
// registers; tests/tensor/attention_fa2_forward_test.cc calls them on the
// host for 32 emulated lanes (mma_fragments.h's EmulateMma for the products),
// so that the kernel's bookkeeping is checked without a device.
//
// A warp owns 16 query rows; lane (g = lane / 4, t = lane % 4) holds the
// score and output accumulators of rows g and g + 8 (MmaCElement): value i
// of an n tile is row i / 2 ("row half" 0 or 1), column 2t + i % 2.

#include <stdint.h>

#include <cmath>

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/mma_fragments.h"
#include "dtensor/tensor/cuda/row_body.h"

// Full unrolling of the loops over a lane's register arrays (indexed by
// constants only, so that they stay in registers); nothing on the host.
#if defined(__CUDACC__)
#define DT_FA2_UNROLL _Pragma("unroll")
#else
#define DT_FA2_UNROLL
#endif

namespace dtensor::cuda {

// A block: 4 warps of 16 query rows; the keys of one step (a tile).
inline constexpr int kFa2ForwardWarps = 4;
inline constexpr int kFa2ForwardRows = kMmaM * kFa2ForwardWarps;
inline constexpr int kFa2ForwardKeys = 64;
// The score accumulator tiles of a step (8 keys each).
inline constexpr int kFa2KeyTiles = kFa2ForwardKeys / kMmaN;
// 16-bit elements in 16 bytes (a cp.async and an ldmatrix row).
inline constexpr int kFa2Chunk = 8;

// Shared tiles are [rows][D] 16-bit elements, D / 8 chunks of 16 bytes a row
// (D >= 64, a multiple of 128 bytes), with chunk c of row r stored at chunk
// c ^ (r % 8): the 8 rows one ldmatrix matrix reads (same logical chunk)
// then fall in 8 distinct 16-byte bank groups, so that no load conflicts.
// Returns the element offset of (row, chunk). Requires: chunk < kChunks.
template <int kChunks>
DT_HOST_DEVICE constexpr int Fa2SwizzledOffset(int row, int chunk) {
  static_assert(kChunks % 8 == 0, "rows of a multiple of 128 bytes");
  return (row * kChunks + (chunk ^ (row % 8))) * kFa2Chunk;
}

// The (row, chunk) of a tile whose address a lane gives to ldmatrix.x4.
struct Fa2LdRow {
  int row;
  int chunk;
};

// An A operand [16 x 16] (rows row0 + (0-15), the 16 columns of chunks
// chunk0, chunk0 + 1) by ldmatrix.x4: matrices (rows 0-7, chunk0),
// (8-15, chunk0), (0-7, chunk0 + 1), (8-15, chunk0 + 1) are registers 0-3
// (MmaAElement). The same rows give V's B operands by ldmatrix.x4.trans
// (row0 the slice's first key): registers 0, 1 are B (keys 0-7, 8-15) for
// the dims of chunk0, registers 2, 3 for those of chunk0 + 1.
DT_HOST_DEVICE constexpr Fa2LdRow Fa2ARow(int lane, int row0, int chunk0) {
  return {row0 + lane % 16, chunk0 + lane / 16};
}

// K's B operands of two adjacent key tiles by ldmatrix.x4 (not transposed):
// B (k = dim, n = key) is K [key][dim] read row by row; registers 0, 1 are
// the keys key0 + (0-7) with the dims of chunks c0, c0 + 1, registers 2, 3
// the keys key0 + (8-15).
DT_HOST_DEVICE constexpr Fa2LdRow Fa2KRow(int lane, int key0, int chunk0) {
  return {key0 + lane / 16 * 8 + lane % 8, chunk0 + lane / 8 % 2};
}

// The keys a block of query rows [q0, q0 + rows) walks: [0, end), the tiles
// past its last row's visible keys skipped (causal).
DT_HOST_DEVICE inline int64_t Fa2KeyEnd(int64_t q0, int64_t rows, int64_t lq,
                                        int64_t lk, bool causal) {
  return VisibleKeys(q0 + rows - 1, lq, lk, causal);
}

// The keys of a warp's 16 rows from query0: `end`, the keys its last row
// (below lq) sees (0 for a warp past lq: it skips every tile from there on);
// `first`, the keys its first row sees (the fewest); `visible[h]`, the keys
// of this lane's row half h (rows past lq see as the last real row would,
// unmasked garbage that is never written).
struct Fa2WarpKeys {
  int64_t end;
  int64_t first;
  int64_t visible[2];
};

DT_HOST_DEVICE inline Fa2WarpKeys Fa2KeysOfWarp(int64_t query0, int lane,
                                                int64_t lq, int64_t lk,
                                                bool causal) {
  Fa2WarpKeys keys{0, 0, {0, 0}};
  if (query0 >= lq) return keys;
  const int64_t last = query0 + kMmaM - 1 < lq ? query0 + kMmaM - 1 : lq - 1;
  keys.end = VisibleKeys(last, lq, lk, causal);
  keys.first = VisibleKeys(query0, lq, lk, causal);
  for (int h = 0; h < 2; ++h) {
    keys.visible[h] = VisibleKeys(query0 + lane / 4 + 8 * h, lq, lk, causal);
  }
  return keys;
}

// Whether the key tile at key0 has a key that some row seeing
// `first_visible` keys (the warp's first row, the one that sees fewest) must
// not see: only those tiles (the causal diagonal, the last tile past lk) are
// masked.
DT_HOST_DEVICE inline bool Fa2TileNeedsMask(int64_t key0,
                                            int64_t first_visible) {
  return key0 + kFa2ForwardKeys > first_visible;
}

// The running state of the lane's two rows: the max of the raw scores seen
// (-inf before any key) and the lane's part of the sum of the weights (the
// four lanes of a row add theirs at the end, FlashAttention-2's deferred sum).
struct Fa2RowState {
  float max[2];
  float sum[2];
};

DT_HOST_DEVICE inline Fa2RowState Fa2InitialState() {
  return {{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
}

// Sets to -inf the lane's scores of keys key0 + column that its rows may not
// see (visible[h]: the keys row half h sees).
DT_HOST_DEVICE inline void Fa2MaskScores(float (&s)[kFa2KeyTiles][4], int lane,
                                         int64_t key0,
                                         const int64_t (&visible)[2]) {
  DT_FA2_UNROLL
  for (int n = 0; n < kFa2KeyTiles; ++n) {
    DT_FA2_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int64_t key = key0 + n * kMmaN + MmaCElement(lane, i).col;
      if (key >= visible[i / 2]) s[n][i] = -INFINITY;
    }
  }
}

// The lane's part of its rows' max score of the step; the quad's max
// (shuffles over lanes ^ 1, ^ 2) completes it.
DT_HOST_DEVICE inline void Fa2LaneMax(const float (&s)[kFa2KeyTiles][4],
                                      float (&top)[2]) {
  top[0] = top[1] = -INFINITY;
  DT_FA2_UNROLL
  for (int n = 0; n < kFa2KeyTiles; ++n) {
    DT_FA2_UNROLL
    for (int i = 0; i < 4; ++i) top[i / 2] = fmaxf(top[i / 2], s[n][i]);
  }
}

// One step of the online softmax given the rows' max of the step (`top`,
// the quad's): the scores become the weights exp(scale (s - max)) (exp2 of
// log2(e)-prescaled arguments, `scale_log2` = scale log2(e)), the lane's sums
// take them, and `correction` gets the factor each row's output accumulator
// takes before this step's P V. A row that has seen no key keeps max -inf
// and weights 0.
DT_HOST_DEVICE inline void Fa2SoftmaxStep(float (&s)[kFa2KeyTiles][4],
                                          const float (&top)[2],
                                          float scale_log2, Fa2RowState& state,
                                          float (&correction)[2]) {
  float shift[2];
  DT_FA2_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float max = fmaxf(state.max[h], top[h]);
    // -inf - -inf is nan: an unseen row corrects by 1 and shifts by 0 (its
    // scores are all -inf, their weights 0).
    correction[h] =
        max == -INFINITY ? 1.0f : exp2f((state.max[h] - max) * scale_log2);
    shift[h] = max == -INFINITY ? 0.0f : max * scale_log2;
    state.max[h] = max;
    state.sum[h] *= correction[h];
  }
  DT_FA2_UNROLL
  for (int n = 0; n < kFa2KeyTiles; ++n) {
    DT_FA2_UNROLL
    for (int i = 0; i < 4; ++i) {
      s[n][i] = exp2f(s[n][i] * scale_log2 - shift[i / 2]);
      state.sum[i / 2] += s[n][i];
    }
  }
}

// Multiplies the lane's output accumulators (kTiles tiles of 8 dims) by
// their rows' corrections.
template <int kTiles>
DT_HOST_DEVICE inline void Fa2Rescale(float (&o)[kTiles][4],
                                      const float (&correction)[2]) {
  DT_FA2_UNROLL
  for (int n = 0; n < kTiles; ++n) {
    DT_FA2_UNROLL
    for (int i = 0; i < 4; ++i) o[n][i] *= correction[i / 2];
  }
}

// The weight that is (reg, half) of P's A operand for the 16 keys of slice
// kk (the accumulators of key tiles 2 kk and 2 kk + 1, AccumulatorTileOfA).
DT_HOST_DEVICE constexpr float Fa2PValue(const float (&p)[kFa2KeyTiles][4],
                                         int kk, int reg, int half) {
  return p[2 * kk + AccumulatorTileOfA(reg)][AccumulatorValueOfA(reg, half)];
}

// The end of a row given its quad's total sum: the factor of its output
// accumulators (0 for a row that saw no key) and its log-sum-exp of the
// scaled scores, max scale + log(sum) (-inf for a row that saw no key).
struct Fa2RowEnd {
  float inverse;
  float lse;
};

DT_HOST_DEVICE inline Fa2RowEnd Fa2FinishRow(float max, float total,
                                             float scale) {
  if (total == 0.0f) return {0.0f, -INFINITY};
  return {1.0f / total, max * scale + logf(total)};
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_FA2_BODY_H_
