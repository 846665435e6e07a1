// The tensor-core attention forward (LaunchAttentionMmaForward,
// attention_mma_kernels.h), FlashAttention-2 style with every accumulator in
// registers: a block of 4 warps per (batch entry, 64 query rows), each warp
// 16 rows whose Q fragments it holds; key and value tiles of 64 rows are
// double-buffered in shared memory by cp.async (zeros past lk and past e);
// per tile the warp computes S = Q K^T (mma.sync m16n8k16, f32), the online
// softmax of its lanes' rows, and O += P V with P rounded to the input type
// straight from the score accumulators. The lane-level math is in
// attention_fa2_body.h (tested on the host); the instructions in
// mma_sync.cuh. Shared tiles are [rows][D] swizzled (Fa2SwizzledOffset);
// D is 64 or 128, head dims below it zero-padded.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "dtensor/tensor/cuda/attention_fa2_body.h"
#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/mma_launch.cuh"
#include "dtensor/tensor/cuda/mma_sync.cuh"

namespace dtensor::cuda {
namespace {

constexpr int kThreadsPerBlock = kFa2ForwardWarps * kWarpLanes;

template <typename H>
struct Fa2ForwardArgs {
  StridedShape<3> batch;
  int64_t lq;
  int64_t lk;
  int e;
  bool causal;
  float scale;
  float scale_log2;  // scale log2(e).
  const H* q;
  const H* k;
  const H* v;
  H* out;  // Null: the log-sum-exps alone.
  float* lse;
};

// Shared memory: the query tile, then two key and two value tiles.
template <int D>
constexpr int Fa2SharedBytes() {
  return (kFa2ForwardRows + 4 * kFa2ForwardKeys) * D * 2;
}

// Issues the cp.async copies of rows [0, rows) of src (row stride e) into
// the swizzled tile dst [kRows][D]; zeros past them and past column e.
template <int kRows, int D, typename H>
__device__ void LoadTile(H* dst, const H* src, int64_t rows, int e) {
  constexpr int kChunks = D / kFa2Chunk;
  for (int x = threadIdx.x; x < kRows * kChunks; x += kThreadsPerBlock) {
    const int r = x / kChunks;
    const int c = x % kChunks;
    const bool valid = r < rows && c * kFa2Chunk < e;
    const H* from =
        valid ? src + r * static_cast<int64_t>(e) + c * kFa2Chunk : src;
    CpAsync16(dst + Fa2SwizzledOffset<kChunks>(r, c), from, valid);
  }
}

__device__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// What a warp keeps over the key tiles.
template <int D>
struct Fa2WarpState {
  uint32_t q[D / kMmaK][4];  // Its 16 query rows as A operands.
  float o[D / kMmaN][4];     // Its output accumulators.
  Fa2RowState rows;
};

// s = the warp's scores against the 64 staged keys sk.
template <typename H, int D>
__device__ void ScoreTile(const uint32_t (&q)[D / kMmaK][4], const H* sk,
                          int lane, float (&s)[kFa2KeyTiles][4]) {
  constexpr int kChunks = D / kFa2Chunk;
  DT_FA2_UNROLL
  for (int n = 0; n < kFa2KeyTiles; ++n) {
    DT_FA2_UNROLL
    for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
  }
  DT_FA2_UNROLL
  for (int kk = 0; kk < D / kMmaK; ++kk) {
    DT_FA2_UNROLL
    for (int np = 0; np < kFa2KeyTiles / 2; ++np) {
      const Fa2LdRow at = Fa2KRow(lane, np * 2 * kMmaN, 2 * kk);
      uint32_t b[4];
      LdMatrixX4(b, sk + Fa2SwizzledOffset<kChunks>(at.row, at.chunk));
      const uint32_t first[2] = {b[0], b[1]};
      const uint32_t second[2] = {b[2], b[3]};
      MmaInput<H>::Mma(s[2 * np], q[kk], first);
      MmaInput<H>::Mma(s[2 * np + 1], q[kk], second);
    }
  }
}

// o += p (rounded to H) V for the 64 staged values sv.
template <typename H, int D>
__device__ void AddValues(const float (&p)[kFa2KeyTiles][4], const H* sv,
                          int lane, float (&o)[D / kMmaN][4]) {
  constexpr int kChunks = D / kFa2Chunk;
  DT_FA2_UNROLL
  for (int kk = 0; kk < kFa2ForwardKeys / kMmaK; ++kk) {
    uint32_t a[4];
    DT_FA2_UNROLL
    for (int reg = 0; reg < 4; ++reg) {
      a[reg] =
          MmaInput<H>::Pack(Fa2PValue(p, kk, reg, 0), Fa2PValue(p, kk, reg, 1));
    }
    DT_FA2_UNROLL
    for (int dp = 0; dp < D / (2 * kMmaN); ++dp) {
      const Fa2LdRow at = Fa2ARow(lane, kk * kMmaK, 2 * dp);
      uint32_t b[4];
      LdMatrixX4Trans(b, sv + Fa2SwizzledOffset<kChunks>(at.row, at.chunk));
      const uint32_t first[2] = {b[0], b[1]};
      const uint32_t second[2] = {b[2], b[3]};
      MmaInput<H>::Mma(o[2 * dp], a, first);
      MmaInput<H>::Mma(o[2 * dp + 1], a, second);
    }
  }
}

// One key tile (at key0, staged in sk and sv) for the warp.
template <typename H, int D>
__device__ void WarpStep(const Fa2ForwardArgs<H>& a, Fa2WarpState<D>& w,
                         const Fa2WarpKeys& keys, const H* sk, const H* sv,
                         int lane, int64_t key0) {
  float s[kFa2KeyTiles][4];
  ScoreTile<H, D>(w.q, sk, lane, s);
  if (Fa2TileNeedsMask(key0, keys.first)) {
    Fa2MaskScores(s, lane, key0, keys.visible);
  }
  float top[2];
  Fa2LaneMax(s, top);
  top[0] = QuadMax(top[0]);
  top[1] = QuadMax(top[1]);
  float correction[2];
  Fa2SoftmaxStep(s, top, a.scale_log2, w.rows, correction);
  if (a.out == nullptr) return;
  Fa2Rescale(w.o, correction);
  AddValues<H, D>(s, sv, lane, w.o);
}

// The warp's log-sum-exps and (with out) its output rows, rounded to H and
// staged through `stage` (the warp's 16 rows of the query tile, no longer
// read) so that the stores are 16 bytes wide.
template <typename H, int D>
__device__ void WriteRows(const Fa2ForwardArgs<H>& a, const Fa2WarpState<D>& w,
                          H* stage, int lane, int64_t entry, int64_t query0) {
  constexpr int kChunks = D / kFa2Chunk;
  Fa2RowEnd end[2];
  for (int h = 0; h < 2; ++h) {
    end[h] = Fa2FinishRow(w.rows.max[h], QuadSum(w.rows.sum[h]), a.scale);
    const int64_t query = query0 + lane / 4 + 8 * h;
    if (lane % 4 == 0 && query < a.lq) a.lse[entry * a.lq + query] = end[h].lse;
  }
  if (a.out == nullptr) return;
  DT_FA2_UNROLL
  for (int n = 0; n < D / kMmaN; ++n) {
    DT_FA2_UNROLL
    for (int h = 0; h < 2; ++h) {
      const FragmentElement at = MmaCElement(lane, 2 * h);
      *reinterpret_cast<uint32_t*>(
          stage + Fa2SwizzledOffset<kChunks>(at.row, n) + at.col) =
          MmaInput<H>::Pack(w.o[n][2 * h] * end[h].inverse,
                            w.o[n][2 * h + 1] * end[h].inverse);
    }
  }
  __syncwarp();
  for (int x = lane; x < kMmaM * kChunks; x += kWarpLanes) {
    const int r = x / kChunks;
    const int c = x % kChunks;
    const int64_t query = query0 + r;
    if (query >= a.lq || c * kFa2Chunk >= a.e) continue;
    *reinterpret_cast<uint4*>(a.out + (entry * a.lq + query) * a.e +
                              c * kFa2Chunk) =
        *reinterpret_cast<const uint4*>(stage +
                                        Fa2SwizzledOffset<kChunks>(r, c));
  }
}

template <typename H, int D>
__device__ void LoadQueryFragments(const H* sq, int warp, int lane,
                                   uint32_t (&q)[D / kMmaK][4]) {
  constexpr int kChunks = D / kFa2Chunk;
  DT_FA2_UNROLL
  for (int kk = 0; kk < D / kMmaK; ++kk) {
    const Fa2LdRow at = Fa2ARow(lane, warp * kMmaM, 2 * kk);
    LdMatrixX4(q[kk], sq + Fa2SwizzledOffset<kChunks>(at.row, at.chunk));
  }
}

template <typename H, int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    Fa2ForwardKernel(Fa2ForwardArgs<H> a) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTile = kFa2ForwardKeys * D;
  H* sq = reinterpret_cast<H*>(shared);
  H* sk = sq + kFa2ForwardRows * D;  // Two tiles, then the two of sv.
  H* sv = sk + 2 * kTile;
  const int64_t tiles = (a.lq + kFa2ForwardRows - 1) / kFa2ForwardRows;
  const int64_t entry = blockIdx.x / tiles;
  // The causal blocks' heaviest (last) query tiles first.
  const int64_t q0 = (tiles - 1 - blockIdx.x % tiles) * kFa2ForwardRows;
  const int64_t rows = MinOf(kFa2ForwardRows, a.lq - q0);
  int64_t at[3];
  OperandOffsetsAt(a.batch, entry, at);
  const int64_t end = Fa2KeyEnd(q0, rows, a.lq, a.lk, a.causal);
  const auto load_keys = [&](int64_t key0, int buffer) {
    const int64_t n = MinOf(kFa2ForwardKeys, a.lk - key0);
    LoadTile<kFa2ForwardKeys, D>(sk + buffer * kTile, a.k + at[1] + key0 * a.e,
                                 n, a.e);
    if (a.out != nullptr) {
      LoadTile<kFa2ForwardKeys, D>(sv + buffer * kTile,
                                   a.v + at[2] + key0 * a.e, n, a.e);
    }
  };
  LoadTile<kFa2ForwardRows, D>(sq, a.q + at[0] + q0 * a.e, rows, a.e);
  if (end > 0) load_keys(0, 0);
  CpAsyncCommit();
  const int warp = threadIdx.x / kWarpLanes;
  const int lane = threadIdx.x % kWarpLanes;
  const int64_t query0 = q0 + warp * kMmaM;
  const Fa2WarpKeys keys = Fa2KeysOfWarp(query0, lane, a.lq, a.lk, a.causal);
  Fa2WarpState<D> w;
  w.rows = Fa2InitialState();
  DT_FA2_UNROLL
  for (int n = 0; n < D / kMmaN; ++n) {
    DT_FA2_UNROLL
    for (int i = 0; i < 4; ++i) w.o[n][i] = 0.0f;
  }
  for (int64_t key0 = 0; key0 < end; key0 += kFa2ForwardKeys) {
    const int buffer = static_cast<int>(key0 / kFa2ForwardKeys % 2);
    if (key0 + kFa2ForwardKeys < end) {
      load_keys(key0 + kFa2ForwardKeys, buffer ^ 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();  // The tile (and at first the query tile) is staged.
    if (key0 == 0) LoadQueryFragments<H, D>(sq, warp, lane, w.q);
    if (key0 < keys.end) {
      WarpStep<H, D>(a, w, keys, sk + buffer * kTile, sv + buffer * kTile, lane,
                     key0);
    }
    __syncthreads();  // Every warp is done with the buffer reloaded next.
  }
  CpAsyncWait<0>();  // No copy still lands in the query tile.
  __syncthreads();
  if (query0 >= a.lq) return;
  WriteRows<H, D>(a, w, sq + warp * kMmaM * D, lane, entry, query0);
}

}  // namespace

cudaError_t LaunchAttentionMmaForward(ScalarType type, const AttentionLaunch& a,
                                      const void* q, const void* k,
                                      const void* v, void* out, float* lse,
                                      cudaStream_t stream) {
  return DispatchMma(type, a.e, [&](auto tag, auto dim) {
    using H = decltype(tag);
    constexpr int D = decltype(dim)::value;
    const Fa2ForwardArgs<H> args{a.batch,
                                 a.lq,
                                 a.lk,
                                 static_cast<int>(a.e),
                                 a.causal,
                                 static_cast<float>(a.scale),
                                 static_cast<float>(a.scale * kFa2Log2e),
                                 static_cast<const H*>(q),
                                 static_cast<const H*>(k),
                                 static_cast<const H*>(v),
                                 static_cast<H*>(out),
                                 lse};
    const int64_t row_tiles = (a.lq + kFa2ForwardRows - 1) / kFa2ForwardRows;
    return LaunchMma(Fa2ForwardKernel<H, D>, args, a.entries * row_tiles,
                     kThreadsPerBlock, Fa2SharedBytes<D>(), stream);
  });
}

}  // namespace dtensor::cuda
