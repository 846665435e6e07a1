// The tensor-core attention forward (attention_mma_kernels.h): WMMA bf16/f16
// 16x16x16 products with f32 accumulators (the backward is
// attention_fa2_backward.cu). Shared-memory rows are padded by
// 8 halves (4 floats) so that the warps' fragment loads spread over the
// banks; every fragment starts 32-byte aligned (16-row blocks of a padded
// row are multiples of 32 bytes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/mma_launch.cuh"

namespace dtensor::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarp = 32;
constexpr int kFrag = 16;
// Forward: query rows of a block (16 a warp); the keys of a step.
constexpr int kForwardWarps = 4;
constexpr int kForwardRows = kFrag * kForwardWarps;
constexpr int kForwardKeys = 64;

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

// Byte offsets of the forward block's shared memory for head dim (padded) D.
template <int D>
struct ForwardLayout {
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kForwardRows * OperandStride(D) * 2;
  static constexpr int kV = kK + kForwardKeys * OperandStride(D) * 2;
  static constexpr int kS = kV + kForwardKeys * OperandStride(D) * 2;
  static constexpr int kP = kS + kForwardRows * FloatStride(kForwardKeys) * 4;
  static constexpr int kO = kP + kForwardRows * HalfStride(kForwardKeys) * 2;
  static constexpr int kBytes = kO + kForwardRows * FloatStride(D) * 4;
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
struct MmaForwardArgs {
  MmaProblem p;
  const H* q;
  const H* k;
  const H* v;
  H* out;
  float* lse;
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

// How many keys query `query` sees (row_body.h's VisibleKeys).
__device__ int64_t Visible(const MmaProblem& p, int64_t query) {
  return VisibleKeys(query, p.lq, p.lk, p.causal);
}

// One key step of the forward for this lane's half row: the scores of the
// warp's 16 rows against the step's keys (in s, scaled here), the running
// max m and sum l, the weights into p (the input type); returns the factor
// the row's output accumulator takes before the step's weighted values.
template <typename H>
__device__ float SoftmaxStep(const float* s_row, H* p_row, int64_t visible,
                             float scale, float& m, float& l) {
  constexpr int kHalf = kForwardKeys / 2;
  float top = -INFINITY;
#pragma unroll
  for (int c = 0; c < kHalf; ++c) {
    if (c < visible) top = fmaxf(top, s_row[c] * scale);
  }
  top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
  const float m_new = fmaxf(m, top);
  // No key seen yet: nothing to correct, every weight 0.
  const float correction = m_new == -INFINITY ? 1.0f : __expf(m - m_new);
  float sum = 0;
#pragma unroll
  for (int c = 0; c < kHalf; ++c) {
    const float w = c < visible ? __expf(s_row[c] * scale - m_new) : 0.0f;
    p_row[c] = static_cast<H>(w);
    sum += w;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  l = l * correction + sum;
  m = m_new;
  return correction;
}

// The warp's 16 score rows of a key step, s_rows [16][FloatStride(keys)] =
// Q K^T, from its query rows' fragments and the staged keys.
template <typename H, int D>
__device__ void ForwardScores(const FragA<H, wmma::row_major> (&q)[D / kFrag],
                              const H* sk, float* s_rows) {
  for (int j = 0; j < kForwardKeys / kFrag; ++j) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int d = 0; d < D / kFrag; ++d) {
      FragB<H, wmma::col_major> fb;
      wmma::load_matrix_sync(fb, sk + j * kFrag * OperandStride(D) + d * kFrag,
                             OperandStride(D));
      wmma::mma_sync(acc, q[d], fb, acc);
    }
    wmma::store_matrix_sync(s_rows + j * kFrag, acc, FloatStride(kForwardKeys),
                            wmma::mem_row_major);
  }
}

// o_rows [16][FloatStride(D)] += p_rows [16][keys] V for the warp's rows.
template <typename H, int D>
__device__ void ForwardAccumulate(const H* p_rows, const H* sv, float* o_rows) {
  FragA<H, wmma::row_major> pf[kForwardKeys / kFrag];
#pragma unroll
  for (int kk = 0; kk < kForwardKeys / kFrag; ++kk) {
    wmma::load_matrix_sync(pf[kk], p_rows + kk * kFrag,
                           HalfStride(kForwardKeys));
  }
  for (int j = 0; j < D / kFrag; ++j) {
    Acc acc;
    wmma::load_matrix_sync(acc, o_rows + j * kFrag, FloatStride(D),
                           wmma::mem_row_major);
#pragma unroll
    for (int kk = 0; kk < kForwardKeys / kFrag; ++kk) {
      FragB<H, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, sv + kk * kFrag * OperandStride(D) + j * kFrag,
                             OperandStride(D));
      wmma::mma_sync(acc, pf[kk], fb, acc);
    }
    wmma::store_matrix_sync(o_rows + j * kFrag, acc, FloatStride(D),
                            wmma::mem_row_major);
  }
}

template <typename H, int D>
__global__ void __launch_bounds__(kForwardWarps* kWarp)
    MmaForwardKernel(MmaForwardArgs<H> a) {
  using L = ForwardLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  H* sk = reinterpret_cast<H*>(shared + L::kK);
  H* sv = reinterpret_cast<H*>(shared + L::kV);
  float* so = reinterpret_cast<float*>(shared + L::kO);
  const MmaProblem& p = a.p;
  const int64_t tiles = (p.lq + kForwardRows - 1) / kForwardRows;
  const int64_t entry = blockIdx.x / tiles;
  // The causal blocks' heaviest (last) query tiles first.
  const int64_t q0 = (tiles - 1 - blockIdx.x % tiles) * kForwardRows;
  const int64_t rows = MinOf(kForwardRows, p.lq - q0);
  int64_t at[3];
  OperandOffsetsAt(p.batch, entry, at);
  const bool with_out = a.out != nullptr;
  H* sq = reinterpret_cast<H*>(shared + L::kQ);
  StageRows<kForwardRows, D>(sq, a.q + at[0] + q0 * p.e, rows, p.e);
  for (int x = threadIdx.x; with_out && x < kForwardRows * FloatStride(D);
       x += blockDim.x) {
    so[x] = 0;
  }
  const int warp = threadIdx.x / kWarp;
  const int half = threadIdx.x % 2;
  const int r = warp * kFrag + threadIdx.x % kWarp / 2;  // The lane's row.
  const int64_t query = q0 + r;
  const int64_t visible = query < p.lq ? Visible(p, query) : 0;
  float m = -INFINITY;
  float l = 0;
  __syncthreads();
  // The warp's query rows stay in registers over every key step.
  FragA<H, wmma::row_major> q_frags[D / kFrag];
#pragma unroll
  for (int d = 0; d < D / kFrag; ++d) {
    wmma::load_matrix_sync(q_frags[d],
                           sq + warp * kFrag * OperandStride(D) + d * kFrag,
                           OperandStride(D));
  }
  const int64_t keys = Visible(p, q0 + rows - 1);
  for (int64_t k0 = 0; k0 < keys; k0 += kForwardKeys) {
    const int64_t n = MinOf(kForwardKeys, p.lk - k0);
    __syncthreads();  // The previous step is done with sk and sv.
    StageRows<kForwardKeys, D>(sk, a.k + at[1] + k0 * p.e, n, p.e);
    if (with_out)
      StageRows<kForwardKeys, D>(sv, a.v + at[2] + k0 * p.e, n, p.e);
    __syncthreads();
    float* ss = reinterpret_cast<float*>(shared + L::kS);
    H* sp = reinterpret_cast<H*>(shared + L::kP);
    ForwardScores<H, D>(q_frags, sk,
                        ss + warp * kFrag * FloatStride(kForwardKeys));
    __syncwarp();
    const int col0 = half * (kForwardKeys / 2);
    const int64_t seen = visible - k0 - col0;
    const float correction =
        SoftmaxStep(ss + r * FloatStride(kForwardKeys) + col0,
                    sp + r * HalfStride(kForwardKeys) + col0,
                    seen < 0 ? 0 : seen, p.scale, m, l);
    if (!with_out) continue;
    float* o_row = so + r * FloatStride(D) + half * (D / 2);
    for (int c = 0; c < D / 2; ++c) o_row[c] *= correction;
    __syncwarp();
    ForwardAccumulate<H, D>(sp + warp * kFrag * HalfStride(kForwardKeys), sv,
                            so + warp * kFrag * FloatStride(D));
  }
  __syncthreads();  // so is complete (zeroed only, when no key is seen).
  if (query >= p.lq) return;
  const int64_t row = entry * p.lq + query;
  if (half == 0) a.lse[row] = l == 0 ? -INFINITY : m + logf(l);
  if (!with_out) return;
  const float inverse = l == 0 ? 0.0f : 1.0f / l;
  const float* o_row = so + r * FloatStride(D);
  H* out = a.out + row * p.e;
  for (int c = half * (D / 2); c < (half + 1) * (D / 2) && c < p.e; ++c) {
    out[c] = static_cast<H>(o_row[c] * inverse);
  }
}

MmaProblem MmaProblemOf(const AttentionLaunch& a) {
  return {a.batch,  a.lq,
          a.lk,     static_cast<int>(a.e),
          a.causal, static_cast<float>(a.scale)};
}

template <typename H, int D>
cudaError_t ForwardOf(const AttentionLaunch& a, const MmaForwardArgs<H>& args,
                      cudaStream_t stream) {
  const int64_t tiles = (a.lq + kForwardRows - 1) / kForwardRows;
  return LaunchMma(MmaForwardKernel<H, D>, args, a.entries * tiles,
                   kForwardWarps * kWarp, ForwardLayout<D>::kBytes, stream);
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

cudaError_t LaunchAttentionMmaForward(ScalarType type, const AttentionLaunch& a,
                                      const void* q, const void* k,
                                      const void* v, void* out, float* lse,
                                      cudaStream_t stream) {
  return DispatchMma(type, a.e, [&](auto tag, auto dim) {
    using H = decltype(tag);
    const MmaForwardArgs<H> args{
        MmaProblemOf(a),          static_cast<const H*>(q),
        static_cast<const H*>(k), static_cast<const H*>(v),
        static_cast<H*>(out),     lse};
    return ForwardOf<H, decltype(dim)::value>(a, args, stream);
  });
}

}  // namespace dtensor::cuda
