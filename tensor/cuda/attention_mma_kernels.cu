// The tensor-core attention backward (attention_mma_kernels.h; the forward is
// in attention_fa2_forward.cu): WMMA bf16/f16 16x16x16 products with f32
// accumulators. Shared-memory rows are padded by 8 halves (4 floats) so that
// the warps' fragment loads spread over the banks; every fragment starts
// 32-byte aligned (16-row blocks of a padded row are multiples of 32 bytes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarp = 32;
constexpr int kFrag = 16;
// Backward: keys of a block (16 a warp); the queries of a step (two lanes a
// key row, 32 queries each).
constexpr int kBackwardWarps = 8;
constexpr int kBackwardKeys = kFrag * kBackwardWarps;
constexpr int kBackwardRows = 64;

using Acc = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;
template <typename H, typename Layout>
using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, H, Layout>;
template <typename H, typename Layout>
using FragB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, H, Layout>;

// Padded row strides (elements) of a staged operand with head dim d (halves),
// of f32 scores `cols` wide, and of half-precision weights `cols` wide.
__host__ __device__ constexpr int OperandStride(int d) { return d + 8; }
__host__ __device__ constexpr int FloatStride(int cols) { return cols + 4; }
__host__ __device__ constexpr int HalfStride(int cols) { return cols + 8; }

// Byte offsets of the backward block's shared memory.
template <int D>
struct BackwardLayout {
  static constexpr int kK = 0;
  static constexpr int kV = kK + kBackwardKeys * OperandStride(D) * 2;
  static constexpr int kQ = kV + kBackwardKeys * OperandStride(D) * 2;
  static constexpr int kDout = kQ + kBackwardRows * OperandStride(D) * 2;
  static constexpr int kS = kDout + kBackwardRows * OperandStride(D) * 2;
  static constexpr int kDp =
      kS + kBackwardKeys * FloatStride(kBackwardRows) * 4;
  static constexpr int kP =
      kDp + kBackwardKeys * FloatStride(kBackwardRows) * 4;
  static constexpr int kDs = kP + kBackwardKeys * HalfStride(kBackwardRows) * 2;
  static constexpr int kLse =
      kDs + kBackwardKeys * HalfStride(kBackwardRows) * 2;
  static constexpr int kDelta = kLse + kBackwardRows * 4;
  static constexpr int kBytes = kDelta + kBackwardRows * 4;
};

struct MmaProblem {
  StridedShape<3> batch;
  int64_t lq;
  int64_t lk;
  int e;
  bool causal;
  float scale;
};

template <typename H>
struct MmaBackwardArgs {
  MmaProblem p;
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

// dst [kRows][OperandStride(D)] = the rows [0, rows) of src (row stride e,
// e % 8 == 0, 16-byte aligned), zeros past them and past column e, 16 bytes
// a thread at a time.
template <int kRows, int D, typename H>
__device__ void StageRows(H* dst, const H* src, int64_t rows, int e) {
  constexpr int kChunks = D / 8;
  for (int x = threadIdx.x; x < kRows * kChunks; x += blockDim.x) {
    const int r = x / kChunks;
    const int c = x % kChunks * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows && c < e) {
      value = *reinterpret_cast<const uint4*>(src +
                                              r * static_cast<int64_t>(e) + c);
    }
    *reinterpret_cast<uint4*>(dst + r * OperandStride(D) + c) = value;
  }
}

// out [16][ld_out] (f32) = a [16][depth] b^T, a and b row-major [.][depth]
// in shared memory (b's 16 rows are out's columns).
template <int kDepth, typename H>
__device__ void ProductABt(const H* a, int lda, const H* b, int ldb, Acc& acc) {
  wmma::fill_fragment(acc, 0.0f);
#pragma unroll
  for (int d = 0; d < kDepth; d += kFrag) {
    FragA<H, wmma::row_major> fa;
    FragB<H, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, a + d, lda);
    wmma::load_matrix_sync(fb, b + d, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// acc += a [16][depth] b [depth][16], both row-major in shared memory.
template <int kDepth, typename H>
__device__ void AddProductAB(const H* a, int lda, const H* b, int ldb,
                             Acc& acc) {
#pragma unroll
  for (int d = 0; d < kDepth; d += kFrag) {
    FragA<H, wmma::row_major> fa;
    FragB<H, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, a + d, lda);
    wmma::load_matrix_sync(fb, b + d * static_cast<int64_t>(ldb), ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// How many keys query `query` sees (row_body.h's VisibleKeys).
__device__ int64_t Visible(const MmaProblem& p, int64_t query) {
  return VisibleKeys(query, p.lq, p.lk, p.causal);
}

// Adds the f32 tile `acc` [16][16] (staged through this warp's `scratch`,
// 16 rows of FloatStride(kBackwardRows)) into dst (row stride e) at rows
// [0, rows) and columns [0, cols).
__device__ void AddTile(const Acc& acc, float* scratch, float* dst,
                        int64_t rows, int64_t cols, int e) {
  const int lane = threadIdx.x % kWarp;
  wmma::store_matrix_sync(scratch, acc, FloatStride(kBackwardRows),
                          wmma::mem_row_major);
  __syncwarp();
  for (int x = lane; x < kFrag * kFrag; x += kWarp) {
    const int r = x / kFrag;
    const int c = x % kFrag;
    if (r < rows && c < cols) {
      atomicAdd(dst + r * static_cast<int64_t>(e) + c,
                scratch[r * FloatStride(kBackwardRows) + c]);
    }
  }
  __syncwarp();
}

// The backward's shared memory, as pointers.
template <typename H, int D>
struct BackwardShared {
  H* k;
  H* v;
  H* q;
  H* dout;
  float* s;
  float* dp;
  H* p;
  H* ds;
  float* lse;
  float* delta;

  __device__ explicit BackwardShared(unsigned char* base) {
    using L = BackwardLayout<D>;
    k = reinterpret_cast<H*>(base + L::kK);
    v = reinterpret_cast<H*>(base + L::kV);
    q = reinterpret_cast<H*>(base + L::kQ);
    dout = reinterpret_cast<H*>(base + L::kDout);
    s = reinterpret_cast<float*>(base + L::kS);
    dp = reinterpret_cast<float*>(base + L::kDp);
    p = reinterpret_cast<H*>(base + L::kP);
    ds = reinterpret_cast<H*>(base + L::kDs);
    lse = reinterpret_cast<float*>(base + L::kLse);
    delta = reinterpret_cast<float*>(base + L::kDelta);
  }
};

// This warp's 16 key rows of S^T = K Q^T and dP^T = V dO^T for the staged
// query step, then P^T and dS^T (the input type) by this lane's half row:
// key `key`, the queries [q0 + col0, q0 + col0 + 32).
template <typename H, int D>
__device__ void GradWeights(const MmaProblem& p, const BackwardShared<H, D>& s,
                            int warp, int key_row, int64_t key, int64_t q0,
                            int col0) {
  constexpr int kS = FloatStride(kBackwardRows);
  for (int j = 0; j < kBackwardRows / kFrag; ++j) {
    Acc acc;
    ProductABt<D>(s.k + warp * kFrag * OperandStride(D), OperandStride(D),
                  s.q + j * kFrag * OperandStride(D), OperandStride(D), acc);
    wmma::store_matrix_sync(s.s + warp * kFrag * kS + j * kFrag, acc, kS,
                            wmma::mem_row_major);
    ProductABt<D>(s.v + warp * kFrag * OperandStride(D), OperandStride(D),
                  s.dout + j * kFrag * OperandStride(D), OperandStride(D), acc);
    wmma::store_matrix_sync(s.dp + warp * kFrag * kS + j * kFrag, acc, kS,
                            wmma::mem_row_major);
  }
  __syncwarp();
  const float* s_row = s.s + key_row * kS;
  const float* dp_row = s.dp + key_row * kS;
  H* p_row = s.p + key_row * HalfStride(kBackwardRows);
  H* ds_row = s.ds + key_row * HalfStride(kBackwardRows);
  for (int c = col0; c < col0 + kBackwardRows / 2; ++c) {
    const int64_t query = q0 + c;
    const bool seen = query < p.lq && key < p.lk && key < Visible(p, query);
    const float w = seen ? __expf(s_row[c] * p.scale - s.lse[c]) : 0.0f;
    const float g = seen ? w * (dp_row[c] - s.delta[c]) * p.scale : 0.0f;
    p_row[c] = static_cast<H>(w);
    ds_row[c] = static_cast<H>(g);
  }
  __syncwarp();
}

// dQ[q0:] += dS K for the staged step: warp w the 16 queries (w % 4) and
// half (w / 4) of the head dims.
template <typename H, int D>
__device__ void AddQueryGrads(const MmaProblem& p,
                              const BackwardShared<H, D>& s, float* dq,
                              int warp, int64_t q0, int64_t rows) {
  constexpr int kRowBlocks = kBackwardRows / kFrag;
  constexpr int kColTiles = D / kFrag / (kBackwardWarps / kRowBlocks);
  const int i0 = warp % kRowBlocks * kFrag;
  if (i0 >= rows) return;
  float* scratch = s.s + warp * kFrag * FloatStride(kBackwardRows);
  for (int t = 0; t < kColTiles; ++t) {
    const int c0 = (warp / kRowBlocks * kColTiles + t) * kFrag;
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < kBackwardKeys; kk += kFrag) {
      // dS [queries][keys] is ds (keys by queries) read column-major.
      FragA<H, wmma::col_major> fa;
      FragB<H, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, s.ds + kk * HalfStride(kBackwardRows) + i0,
                             HalfStride(kBackwardRows));
      wmma::load_matrix_sync(fb, s.k + kk * OperandStride(D) + c0,
                             OperandStride(D));
      wmma::mma_sync(acc, fa, fb, acc);
    }
    AddTile(acc, scratch, dq + (q0 + i0) * p.e + c0, rows - i0, p.e - c0, p.e);
  }
}

template <typename H, int D>
__global__ void __launch_bounds__(kBackwardWarps* kWarp)
    MmaBackwardKernel(MmaBackwardArgs<H> a) {
  extern __shared__ __align__(128) unsigned char shared[];
  const BackwardShared<H, D> s(shared);
  const MmaProblem& p = a.p;
  const int64_t tiles = (p.lk + kBackwardKeys - 1) / kBackwardKeys;
  const int64_t entry = blockIdx.x / tiles;
  const int64_t k0 = blockIdx.x % tiles * kBackwardKeys;
  const int64_t n = MinOf(kBackwardKeys, p.lk - k0);
  int64_t at[3];
  OperandOffsetsAt(p.batch, entry, at);
  StageRows<kBackwardKeys, D>(s.k, a.k + at[1] + k0 * p.e, n, p.e);
  StageRows<kBackwardKeys, D>(s.v, a.v + at[2] + k0 * p.e, n, p.e);
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int key_row = warp * kFrag + lane / 2;
  const int col0 = lane % 2 * (kBackwardRows / 2);
  Acc dk[D / kFrag];
  Acc dv[D / kFrag];
#pragma unroll
  for (int j = 0; j < D / kFrag; ++j) {
    wmma::fill_fragment(dk[j], 0.0f);
    wmma::fill_fragment(dv[j], 0.0f);
  }
  const int64_t first = p.causal ? k0 - (p.lk - p.lq) : 0;
  for (int64_t q0 = first < 0 ? 0 : first; q0 < p.lq; q0 += kBackwardRows) {
    const int64_t rows = MinOf(kBackwardRows, p.lq - q0);
    __syncthreads();  // The previous step is done with q, dout, ds.
    StageRows<kBackwardRows, D>(s.q, a.q + at[0] + q0 * p.e, rows, p.e);
    StageRows<kBackwardRows, D>(s.dout, a.dout + (entry * p.lq + q0) * p.e,
                                rows, p.e);
    for (int i = threadIdx.x; i < kBackwardRows; i += blockDim.x) {
      s.lse[i] = i < rows ? a.lse[entry * p.lq + q0 + i] : 0.0f;
      s.delta[i] = i < rows ? a.delta[entry * p.lq + q0 + i] : 0.0f;
    }
    __syncthreads();
    GradWeights(p, s, warp, key_row, k0 + key_row, q0, col0);
    const H* p_rows = s.p + warp * kFrag * HalfStride(kBackwardRows);
    const H* ds_rows = s.ds + warp * kFrag * HalfStride(kBackwardRows);
#pragma unroll
    for (int j = 0; j < D / kFrag; ++j) {
      AddProductAB<kBackwardRows>(p_rows, HalfStride(kBackwardRows),
                                  s.dout + j * kFrag, OperandStride(D), dv[j]);
      AddProductAB<kBackwardRows>(ds_rows, HalfStride(kBackwardRows),
                                  s.q + j * kFrag, OperandStride(D), dk[j]);
    }
    __syncthreads();  // Every warp's dS^T rows are in s.ds.
    AddQueryGrads(p, s, a.dq + at[0], warp, q0, rows);
  }
  const int64_t key0 = k0 + warp * kFrag;
  if (key0 >= p.lk) return;
  float* scratch = s.s + warp * kFrag * FloatStride(kBackwardRows);
#pragma unroll
  for (int j = 0; j < D / kFrag; ++j) {
    const int c0 = j * kFrag;
    AddTile(dk[j], scratch, a.dk + at[1] + key0 * p.e + c0, p.lk - key0,
            p.e - c0, p.e);
    AddTile(dv[j], scratch, a.dv + at[2] + key0 * p.e + c0, p.lk - key0,
            p.e - c0, p.e);
  }
}

MmaProblem MmaProblemOf(const AttentionLaunch& a) {
  return {a.batch,  a.lq,
          a.lk,     static_cast<int>(a.e),
          a.causal, static_cast<float>(a.scale)};
}

template <typename Kernel, typename Args>
cudaError_t LaunchMma(Kernel* kernel, const Args& args, int64_t blocks,
                      int threads, int bytes, cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  if (blocks > 2147483647) return cudaErrorInvalidConfiguration;
  const cudaError_t error = AllowSharedBytes(kernel, bytes);
  if (error != cudaSuccess) return error;
  kernel<<<static_cast<unsigned>(blocks), threads, bytes, stream>>>(args);
  return cudaGetLastError();
}

template <typename H, int D>
cudaError_t BackwardOf(const AttentionLaunch& a, const MmaBackwardArgs<H>& args,
                       cudaStream_t stream) {
  const int64_t tiles = (a.lk + kBackwardKeys - 1) / kBackwardKeys;
  return LaunchMma(MmaBackwardKernel<H, D>, args, a.entries * tiles,
                   kBackwardWarps * kWarp, BackwardLayout<D>::kBytes, stream);
}

// Calls fn(H{}, std::integral_constant<int, D>{}) with H the WMMA type of
// `type` and D the head dim the kernels are compiled for (64 or 128; the
// columns past e staged as zeros).
template <typename Fn>
cudaError_t DispatchMma(ScalarType type, int64_t e, Fn&& fn) {
  const auto with_type = [&](auto tag) {
    if (e <= 64) return fn(tag, std::integral_constant<int, 64>());
    return fn(tag, std::integral_constant<int, 128>());
  };
  if (type == ScalarType::kBF16) return with_type(__nv_bfloat16());
  if (type == ScalarType::kF16) return with_type(__half());
  return cudaErrorInvalidValue;
}

bool Aligned16(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

}  // namespace

bool AttentionMmaSupports(ScalarType type, const AttentionLaunch& a,
                          const void* q, const void* k, const void* v,
                          const void* out) {
  if (type != ScalarType::kBF16 && type != ScalarType::kF16) return false;
  if (a.e != a.ev || a.e % kFrag != 0 || a.e <= 0 || a.e > 128) return false;
  for (int operand = 0; operand < 3; ++operand) {
    for (int d = 0; d < a.batch.ndim; ++d) {
      if (a.batch.strides[operand][d] % 8 != 0) return false;
    }
  }
  return Aligned16(q) && Aligned16(k) && Aligned16(v) &&
         (out == nullptr || Aligned16(out));
}

cudaError_t LaunchAttentionMmaBackward(ScalarType type,
                                       const AttentionLaunch& a, const void* q,
                                       const void* k, const void* v,
                                       const void* dout, const float* lse,
                                       const float* delta, float* dq, float* dk,
                                       float* dv, cudaStream_t stream) {
  return DispatchMma(type, a.e, [&](auto tag, auto dim) {
    using H = decltype(tag);
    const MmaBackwardArgs<H> args{MmaProblemOf(a),
                                  static_cast<const H*>(q),
                                  static_cast<const H*>(k),
                                  static_cast<const H*>(v),
                                  static_cast<const H*>(dout),
                                  lse,
                                  delta,
                                  dq,
                                  dk,
                                  dv};
    return BackwardOf<H, decltype(dim)::value>(a, args, stream);
  });
}

}  // namespace dtensor::cuda
