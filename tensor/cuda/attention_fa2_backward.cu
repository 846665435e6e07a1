// The tensor-core attention backward (LaunchAttentionMmaBackward of
// attention_mma_kernels.h), FlashAttention-2 style on mma.sync m16n8k16
// (mma_sync.cuh) with f32 accumulators; the lane arithmetic is in
// attention_fa2_backward_body.h, which a CPU warp emulation checks.
//
// A block of 8 warps per (batch entry, 128 keys), warp w the keys 16 w..:
// K and V staged once; the query steps of 64 that see the keys (causal: from
// the first query that sees the block's first key) with Q, dO, lse and delta
// double-buffered (cp.async: step t + 1 loads while step t computes). A step:
// S^T = K Q^T and dP^T = V dO^T into the warp's accumulators; P^T and dS^T in
// place (the mask only on steps that need it); dV += P^T dO and dK += dS^T Q
// with the accumulators as A (registers over every step); dS^T to shared
// memory; dQ += dS K by [16 queries x d / 2] warp tiles added with f32
// atomics. dK and dV are added with f32 atomics at the end, which sums the
// grouped-query entries that share k and v.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dtensor/tensor/cuda/attention_fa2_backward_body.h"
#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/mma_launch.cuh"
#include "dtensor/tensor/cuda/mma_sync.cuh"

namespace dtensor::cuda {
namespace {

constexpr int kFa2Threads = kFa2BackwardWarps * kWarpLanes;

// Byte offsets of the block's shared memory for head dim D: K, V, two
// buffers each of Q and dO, dS^T, two buffers each of lse and delta.
template <int D>
struct Fa2Layout {
  static constexpr int kOperand = Fa2Stride(D) * 2;  // Bytes a staged row.
  static constexpr int kStep =
      kFa2BackwardRows * kOperand;  // A Q or dO buffer.
  static constexpr int kK = 0;
  static constexpr int kV = kK + kFa2BackwardKeys * kOperand;
  static constexpr int kQ = kV + kFa2BackwardKeys * kOperand;
  static constexpr int kDout = kQ + 2 * kStep;
  static constexpr int kDs = kDout + 2 * kStep;
  static constexpr int kLse =
      kDs + kFa2BackwardKeys * Fa2Stride(kFa2BackwardRows) * 2;
  static constexpr int kDelta = kLse + 2 * kFa2BackwardRows * 4;
  static constexpr int kBytes = kDelta + 2 * kFa2BackwardRows * 4;
};

template <typename H>
struct Fa2Args {
  Fa2Problem p;
  StridedShape<3> batch;
  int e;
  const H* q;
  const H* k;
  const H* v;
  const H* dout;
  const float* lse;
  const float* delta;
  float* dq;
  float* dk;
  float* dv;
};

// dst [kRows][Fa2Stride(D)] <- the rows [0, rows) of src (row stride e,
// 16-byte aligned), zeros past them and past column e, by cp.async (the
// caller commits).
template <int kRows, int D, typename H>
__device__ void StageAsync(H* dst, const H* src, int64_t rows, int e) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kFa2Threads == 0, "whole rounds");
#pragma unroll
  for (int round = 0; round < kRows * kChunks / kFa2Threads; ++round) {
    const int x = round * kFa2Threads + threadIdx.x;
    const int r = x / kChunks;
    const int c = x % kChunks * 8;
    const bool valid = r < rows && c < e;
    CpAsync16(dst + r * Fa2Stride(D) + c,
              valid ? src + r * static_cast<int64_t>(e) + c : src, valid);
  }
}

// The block's shared memory, as pointers.
template <typename H, int D>
struct Fa2Shared {
  H* k;
  H* v;
  H* q;
  H* dout;
  H* ds;
  float* lse_log2;
  float* delta;

  __device__ explicit Fa2Shared(unsigned char* base) {
    using L = Fa2Layout<D>;
    k = reinterpret_cast<H*>(base + L::kK);
    v = reinterpret_cast<H*>(base + L::kV);
    q = reinterpret_cast<H*>(base + L::kQ);
    dout = reinterpret_cast<H*>(base + L::kDout);
    ds = reinterpret_cast<H*>(base + L::kDs);
    lse_log2 = reinterpret_cast<float*>(base + L::kLse);
    delta = reinterpret_cast<float*>(base + L::kDelta);
  }
};

// Starts loading the step of queries [q0, q0 + kFa2BackwardRows) into buffer
// `buf`: Q and dO by cp.async, lse (times log2e) and delta by plain loads
// (zeros past lq), visible to the block after its next __syncthreads.
template <typename H, int D>
__device__ void StageStep(const Fa2Args<H>& a, const Fa2Shared<H, D>& s,
                          int64_t entry, int64_t q_at, int64_t q0, int buf) {
  const int64_t rows = a.p.lq - q0;
  StageAsync<kFa2BackwardRows, D>(s.q + buf * kFa2BackwardRows * Fa2Stride(D),
                                  a.q + q_at + q0 * a.e, rows, a.e);
  const int64_t row0 = entry * a.p.lq + q0;
  StageAsync<kFa2BackwardRows, D>(
      s.dout + buf * kFa2BackwardRows * Fa2Stride(D), a.dout + row0 * a.e, rows,
      a.e);
  const int i = threadIdx.x;
  if (i < kFa2BackwardRows) {
    const bool in = i < rows;
    s.lse_log2[buf * kFa2BackwardRows + i] =
        in ? a.lse[row0 + i] * kFa2Log2e : 0.0f;
    s.delta[buf * kFa2BackwardRows + i] = in ? a.delta[row0 + i] : 0.0f;
  }
}

// slot[0] += x, slot[1] += y atomically (one vector reduction, sm_90;
// slot 8-byte aligned).
__device__ inline void AtomicAddPair(float* slot, float x, float y) {
  asm volatile(
      "red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(slot), "f"(x),
      "f"(y)
      : "memory");
}

template <typename H>
__device__ void Mma2(float (&d0)[4], float (&d1)[4], const uint32_t (&a)[4],
                     const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]};
  const uint32_t b1[2] = {b[2], b[3]};
  MmaInput<H>::Mma(d0, a, b0);
  MmaInput<H>::Mma(d1, a, b1);
}

// acc [16 keys][kFa2BackwardRows] = rows_m [16 w..][D] rows_n
// [kFa2BackwardRows][D]^T: this warp's S^T (K, Q) or dP^T (V, dO).
template <typename H, int D>
__device__ void TransposedScores(const H* rows_m, const H* rows_n, int warp,
                                 int lane, float (&acc)[kFa2QueryTiles][4]) {
  const FragmentElement a_at = LdMatrixDownFirst(lane);
  const FragmentElement b_at = LdMatrixAcrossFirst(lane);
  const H* a_row = rows_m + (warp * kMmaM + a_at.row) * Fa2Stride(D) + a_at.col;
  const H* b_row = rows_n + b_at.row * Fa2Stride(D) + b_at.col;
#pragma unroll
  for (int kk = 0; kk < D; kk += kMmaK) {
    uint32_t a[4];
    LdMatrixX4(a, a_row + kk);
#pragma unroll
    for (int j = 0; j < kFa2QueryTiles; j += 2) {
      uint32_t b[4];
      LdMatrixX4(b, b_row + j * kMmaN * Fa2Stride(D) + kk);
      Mma2<H>(acc[j], acc[j + 1], a, b);
    }
  }
}

// acc [16 keys][D] += w^T-as-accumulators [16 keys][kFa2BackwardRows] (rounded
// to H) rows [kFa2BackwardRows][D]: dV += P^T dO, dK += dS^T Q.
template <typename H, int D>
__device__ void AddWeightedRows(const float (&w)[kFa2QueryTiles][4],
                                const H* rows, int lane,
                                float (&acc)[D / kMmaN][4]) {
  const FragmentElement b_at = LdMatrixDownFirst(lane);
  const H* b_row = rows + b_at.row * Fa2Stride(D) + b_at.col;
#pragma unroll
  for (int kq = 0; kq < kFa2BackwardRows / kMmaK; ++kq) {
    uint32_t a[4];
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const float(&tile)[4] = w[2 * kq + AccumulatorTileOfA(reg)];
      a[reg] = MmaInput<H>::Pack(tile[AccumulatorValueOfA(reg, 0)],
                                 tile[AccumulatorValueOfA(reg, 1)]);
    }
#pragma unroll
    for (int dd = 0; dd < D; dd += 2 * kMmaN) {
      uint32_t b[4];
      LdMatrixX4Trans(b, b_row + kq * kMmaK * Fa2Stride(D) + dd);
      Mma2<H>(acc[dd / kMmaN], acc[dd / kMmaN + 1], a, b);
    }
  }
}

// This lane's dS^T values into the block's dS^T (rounded to H).
template <typename H>
__device__ void StoreDs(const float (&ds)[kFa2QueryTiles][4], H* sds, int warp,
                        int lane) {
#pragma unroll
  for (int j = 0; j < kFa2QueryTiles; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      *reinterpret_cast<uint32_t*>(sds + Fa2DsIndex(warp, lane, j, r)) =
          MmaInput<H>::Pack(ds[j][2 * r], ds[j][2 * r + 1]);
    }
  }
}

// dq (the step's first row, row stride e) += dS K for this warp's tile
// (Fa2DqElement), rows [0, rows) and columns [0, e) only.
template <typename H, int D>
__device__ void AddQueryGrads(const Fa2Shared<H, D>& s, float* dq, int64_t rows,
                              int e, int warp, int lane) {
  constexpr int kTiles = Fa2DqCols(D) / kMmaN;
  const int row0 = Fa2DqRow0(warp);
  const int col0 = Fa2DqCol0(warp, D);
  if (row0 >= rows || col0 >= e) return;
  float acc[kTiles][4] = {};
  const FragmentElement a_at = LdMatrixAcrossFirst(lane);
  const FragmentElement b_at = LdMatrixDownFirst(lane);
  const H* a_row =
      s.ds + a_at.row * Fa2Stride(kFa2BackwardRows) + row0 + a_at.col;
  const H* b_row = s.k + b_at.row * Fa2Stride(D) + col0 + b_at.col;
#pragma unroll
  for (int kk = 0; kk < kFa2BackwardKeys; kk += kMmaK) {
    uint32_t a[4];
    LdMatrixX4Trans(a, a_row + kk * Fa2Stride(kFa2BackwardRows));
#pragma unroll
    for (int j = 0; j < kTiles; j += 2) {
      uint32_t b[4];
      LdMatrixX4Trans(b, b_row + kk * Fa2Stride(D) + j * kMmaN);
      Mma2<H>(acc[j], acc[j + 1], a, b);
    }
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; i += 2) {
      // Values i and i + 1 are adjacent columns (col even, e % 16 == 0).
      const FragmentElement at = Fa2DqElement(warp, lane, D, j, i);
      if (at.row < rows && at.col < e) {
        AtomicAddPair(dq + at.row * static_cast<int64_t>(e) + at.col, acc[j][i],
                      acc[j][i + 1]);
      }
    }
  }
}

// dst (the block's first key, row stride e) += this warp's accumulators,
// keys [0, keys) and columns [0, e) only.
template <int D>
__device__ void AddKeyGrads(const float (&acc)[D / kMmaN][4], float* dst,
                            int64_t keys, int e, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < D / kMmaN; ++j) {
#pragma unroll
    for (int i = 0; i < 4; i += 2) {
      const FragmentElement at = Fa2KeyElement(warp, lane, j, i);
      if (at.row < keys && at.col < e) {
        AtomicAddPair(dst + at.row * static_cast<int64_t>(e) + at.col,
                      acc[j][i], acc[j][i + 1]);
      }
    }
  }
}

// One query step on buffer `buf` (staged and visible): dK, dV in the
// warp's registers, dQ added.
template <typename H, int D>
__device__ void Step(const Fa2Args<H>& a, const Fa2Shared<H, D>& s, float* dq,
                     int64_t q0, int64_t k0, int buf, float (&dk)[D / kMmaN][4],
                     float (&dv)[D / kMmaN][4]) {
  const int warp = threadIdx.x / kWarpLanes;
  const int lane = threadIdx.x % kWarpLanes;
  const H* q = s.q + buf * kFa2BackwardRows * Fa2Stride(D);
  const H* dout = s.dout + buf * kFa2BackwardRows * Fa2Stride(D);
  const float* lse_log2 = s.lse_log2 + buf * kFa2BackwardRows;
  const float* delta = s.delta + buf * kFa2BackwardRows;
  float p[kFa2QueryTiles][4] = {};
  float ds[kFa2QueryTiles][4] = {};
  TransposedScores<H, D>(s.k, q, warp, lane, p);
  TransposedScores<H, D>(s.v, dout, warp, lane, ds);
  if (Fa2StepNeedsMask(a.p, q0, k0)) {
    Fa2LaneWeights<true>(a.p, q0, k0, warp, lane, lse_log2, delta, p, ds);
  } else {
    Fa2LaneWeights<false>(a.p, q0, k0, warp, lane, lse_log2, delta, p, ds);
  }
  AddWeightedRows<H, D>(p, dout, lane, dv);
  AddWeightedRows<H, D>(ds, q, lane, dk);
  StoreDs<H>(ds, s.ds, warp, lane);
  // Every warp's dS^T is in s.ds, and every warp is done with this step's
  // Q, dO, lse and delta (the next step's loads may overwrite them).
  __syncthreads();
  AddQueryGrads<H, D>(s, dq + q0 * a.e, a.p.lq - q0, a.e, warp, lane);
}

template <typename H, int D>
__global__ void __launch_bounds__(kFa2Threads) Fa2BackwardKernel(Fa2Args<H> a) {
  extern __shared__ __align__(128) unsigned char shared[];
  const Fa2Shared<H, D> s(shared);
  // Key tile major: the first key tiles, which (causal) walk the most
  // steps, start first, and the grouped-query entries that share k and v
  // run side by side.
  const int64_t entries =
      gridDim.x / ((a.p.lk + kFa2BackwardKeys - 1) / kFa2BackwardKeys);
  const int64_t entry = blockIdx.x % entries;
  const int64_t k0 = blockIdx.x / entries * kFa2BackwardKeys;
  const int64_t first = Fa2FirstQuery(a.p, k0);
  if (first >= a.p.lq) return;  // No query sees the block's keys.
  int64_t at[3];
  OperandOffsetsAt(a.batch, entry, at);
  StageAsync<kFa2BackwardKeys, D>(s.k, a.k + at[1] + k0 * a.e, a.p.lk - k0,
                                  a.e);
  StageAsync<kFa2BackwardKeys, D>(s.v, a.v + at[2] + k0 * a.e, a.p.lk - k0,
                                  a.e);
  StageStep(a, s, entry, at[0], first, 0);
  CpAsyncCommit();
  float dk[D / kMmaN][4] = {};
  float dv[D / kMmaN][4] = {};
  int buf = 0;
  for (int64_t q0 = first; q0 < a.p.lq; q0 += kFa2BackwardRows, buf ^= 1) {
    // Buffer buf ^ 1 is free: every warp passed the last step's second
    // __syncthreads, after its last read of it. s.ds is rewritten only
    // after this step's first __syncthreads, when every warp is done with
    // the last step's dQ.
    if (q0 + kFa2BackwardRows < a.p.lq) {
      StageStep(a, s, entry, at[0], q0 + kFa2BackwardRows, buf ^ 1);
    }
    CpAsyncCommit();  // Possibly empty: the wait below counts groups.
    CpAsyncWait<1>();
    __syncthreads();
    Step<H, D>(a, s, a.dq + at[0], q0, k0, buf, dk, dv);
  }
  const int warp = threadIdx.x / kWarpLanes;
  const int lane = threadIdx.x % kWarpLanes;
  AddKeyGrads<D>(dk, a.dk + at[1] + k0 * a.e, a.p.lk - k0, a.e, warp, lane);
  AddKeyGrads<D>(dv, a.dv + at[2] + k0 * a.e, a.p.lk - k0, a.e, warp, lane);
}

}  // namespace

cudaError_t LaunchAttentionMmaBackward(ScalarType type,
                                       const AttentionLaunch& a, const void* q,
                                       const void* k, const void* v,
                                       const void* dout, const float* lse,
                                       const float* delta, float* dq, float* dk,
                                       float* dv, cudaStream_t stream) {
  return DispatchMma(type, a.e, [&](auto tag, auto dim) {
    using H = decltype(tag);
    constexpr int D = decltype(dim)::value;
    const Fa2Args<H> args{{a.lq, a.lk, a.causal, static_cast<float>(a.scale)},
                          a.batch,
                          static_cast<int>(a.e),
                          static_cast<const H*>(q),
                          static_cast<const H*>(k),
                          static_cast<const H*>(v),
                          static_cast<const H*>(dout),
                          lse,
                          delta,
                          dq,
                          dk,
                          dv};
    const int64_t key_tiles = (a.lk + kFa2BackwardKeys - 1) / kFa2BackwardKeys;
    return LaunchMma(Fa2BackwardKernel<H, D>, args, a.entries * key_tiles,
                     kFa2Threads, Fa2Layout<D>::kBytes, stream);
  });
}

}  // namespace dtensor::cuda
