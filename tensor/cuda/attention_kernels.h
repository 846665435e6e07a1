#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_KERNELS_H_

// Launches of the tiled attention kernels (attention_blocks.h) and of the
// materializing fallback's masked softmax (row_body.h) on a stream.
// Each returns the first launch error (cudaSuccess when every launch was
// accepted); pointers are device pointers.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/attention_blocks.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// What both launches share: `entries` output batch entries whose q, k, v
// matrices (rows contiguous) start at the element offsets `batch` gives for
// the entry's row-major index; the sizes, mask and (effective, > 0) scale.
struct AttentionLaunch {
  int64_t entries = 0;
  StridedShape<3> batch;
  int64_t lq = 0;
  int64_t lk = 0;
  int64_t e = 0;
  int64_t ev = 0;
  bool causal = false;
  double scale = 1;
};

// The shared memory one block of the forward (or backward) kernel needs for
// a floating `type` (AttentionSharedLayout of its compute type).
int64_t AttentionSharedBytes(ScalarType type, int64_t e, int64_t ev,
                             bool backward);

// out [entries, lq, ev] (contiguous, `type`) = the attention of q, k, v
// (`type`); lse [entries, lq] (compute type: float, double for f64) gets the
// rows' log-sum-exps. A launch whose blocks need more shared memory than the
// device grants is an invalid configuration.
cudaError_t LaunchAttentionForward(ScalarType type, const AttentionLaunch& a,
                                   const void* q, const void* k, const void* v,
                                   void* out, void* lse, cudaStream_t stream);

// The gradients of that attention given out and dout [entries, lq, ev]
// (contiguous, `type`), added into dq, dk, dv: compute-type accumulators of
// q's, k's and v's (contiguous) shapes, zeroed by the caller, at q's, k's
// and v's element offsets. lse: the rows' log-sum-exps [entries, lq] in the
// compute type, given (as the forward wrote them) or, with `compute_lse`,
// scratch the launch fills first. delta: compute-type scratch [entries, lq].
cudaError_t LaunchAttentionBackward(ScalarType type, const AttentionLaunch& a,
                                    const void* q, const void* k, const void* v,
                                    const void* out, const void* dout,
                                    void* lse, bool compute_lse, void* delta,
                                    void* dq, void* dk, void* dv,
                                    cudaStream_t stream);

// The attention softmax, in place on f32 or f64 scores [rows, lk], row r being
// query r % lq.
cudaError_t LaunchMaskedSoftmax(ScalarType type, void* scores, int64_t rows,
                                int64_t lq, int64_t lk, bool causal,
                                double scale, cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_KERNELS_H_
