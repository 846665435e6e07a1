#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_MMA_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_MMA_KERNELS_H_

// The tensor-core attention of bf16 and f16 operands (FlashAttention-2
// style, f32 accumulators, never an [lq, lk] matrix), which
// LaunchAttentionForward and LaunchAttentionBackward (attention_kernels.h)
// run where AttentionMmaSupports holds; the tiled f32 kernels stay the path
// (and the reference) for every other shape and type.
//
// Forward (attention_fa2_forward.cu; its lane-level math in
// attention_fa2_body.h): every accumulator in registers, mma.sync m16n8k16
// products (mma_sync.cuh). A block of 4 warps per (batch entry, 64 query
// rows), each warp 16 rows held as A fragments; it walks the key tiles of 64
// its rows may see (causal: the tiles past the block's last query skipped,
// only the diagonal tile masked), K and V double-buffered in swizzled shared
// memory by cp.async: S = Q K^T into the lanes' accumulators, the online
// softmax in f32 on them (row max over each lane quad, exp2), P (rounded to
// the input type) straight from the score accumulators as the A operand of
// O += P V. It writes out (input type, 16-byte stores) and lse (f32) =
// max + log(sum); a row that sees no key gives zeros and lse -inf, as the
// tiled kernels do. Head dims up to 64 run the D = 64 kernel, larger ones
// the D = 128 one, the columns past e zero-padded.
//
// Backward (attention_mma_kernels.cu, warp-level WMMA 16x16x16 products): a
// block of 8 warps per (batch entry, 128 keys), each warp 16 keys, over the
// query tiles of 64 that see them: S^T = K Q^T and
// dP^T = V dO^T by the tensor cores, P = exp(S scale - lse) and
// dS = P (dP - delta) scale (delta = rowsum(dO * O), a preprocessing kernel),
// dV += P^T dO and dK += dS^T Q held in the warps' accumulator fragments
// over all query tiles and added (f32 atomics) at the end, and dQ += dS K
// added with f32 atomics after each query tile. The adds make grouped-query
// entries (several batch entries on one k, v) sum their gradients.

#include <cuda_runtime_api.h>

#include "dtensor/tensor/cuda/attention_kernels.h"

namespace dtensor::cuda {

// Whether the tensor-core path runs this problem: bf16 or f16, e == ev a
// multiple of 16 up to 128, and q, k, v (and `out`, when not null) 16-byte
// aligned.
bool AttentionMmaSupports(ScalarType type, const AttentionLaunch& a,
                          const void* q, const void* k, const void* v,
                          const void* out);

// LaunchAttentionForward's contract on the tensor cores (Requires:
// AttentionMmaSupports); out may be null for the log-sum-exps alone.
cudaError_t LaunchAttentionMmaForward(ScalarType type, const AttentionLaunch& a,
                                      const void* q, const void* k,
                                      const void* v, void* out, float* lse,
                                      cudaStream_t stream);

// The gradients added into the f32 accumulators dq, dk, dv (as
// LaunchAttentionBackward), given lse (LaunchAttentionMmaForward) and
// delta = rowsum(dout * out) [entries, lq]. Requires: AttentionMmaSupports.
cudaError_t LaunchAttentionMmaBackward(ScalarType type,
                                       const AttentionLaunch& a, const void* q,
                                       const void* k, const void* v,
                                       const void* dout, const float* lse,
                                       const float* delta, float* dq, float* dk,
                                       float* dv, cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_MMA_KERNELS_H_
