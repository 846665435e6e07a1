#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_MMA_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_MMA_KERNELS_H_

// The tensor-core attention of bf16 and f16 operands (FlashAttention-2
// style, f32 accumulators, never an [lq, lk] matrix), which
// LaunchAttentionForward and LaunchAttentionBackward (attention_kernels.h)
// run where AttentionMmaSupports holds; the tiled f32 kernels stay the path
// (and the reference) for every other shape and type. Both are
// FlashAttention-2 style on mma.sync m16n8k16 (mma_sync.cuh) with every
// accumulator in registers, their lane-level math in DT_HOST_DEVICE bodies
// that CPU tests run as warp emulations. Head dims up to 64 run the kernels
// compiled for 64, larger ones those for 128 (the columns past e zero-padded).
//
// Forward (attention_fa2_forward.cu; attention_fa2_body.h): a block of 4
// warps per (batch entry, 64 query rows), each warp 16 rows held as A
// fragments; it walks the key tiles of 64 its rows may see (causal: the tiles
// past the block's last query skipped, only the diagonal tile masked), K and
// V double-buffered in swizzled shared memory by cp.async: S = Q K^T into the
// lanes' accumulators, the online softmax in f32 on them (row max over each
// lane quad, exp2), P (rounded to the input type) straight from the score
// accumulators as the A operand of O += P V. It writes out (input type,
// 16-byte stores) and lse (f32) = max + log(sum); a row that sees no key
// gives zeros and lse -inf, as the tiled kernels do.
//
// Backward (attention_fa2_backward.cu; attention_fa2_backward_body.h): a
// block of 8 warps per (batch entry, 128 keys), each warp 16 keys, K and V
// staged once, over the query steps of 64 that see them (Q, dO, lse, delta
// double-buffered by cp.async): S^T = K Q^T and dP^T = V dO^T in registers,
// P = exp2(S scale log2e - lse log2e) and dS = P (dP - delta) scale in
// place (delta = rowsum(dO * O), a preprocessing kernel; the mask only on
// the steps that need it), dV += P^T dO and dK += dS^T Q with those
// accumulators as the A operand, held over all steps and added (f32
// atomics) at the end, and dQ += dS K (dS^T through shared memory) added
// with f32 atomics after each step. The adds make grouped-query entries
// (several batch entries on one k, v) sum their gradients.

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
