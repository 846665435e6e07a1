#ifndef DTENSOR_TENSOR_CUDA_NORM_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_NORM_KERNELS_H_

// Launches of RMSNorm and LayerNorm and of their backward on a stream
// (row_body.h's and norm_body.h's math). Pointers are device pointers; each
// returns the launch error (cudaSuccess when every launch was accepted).

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/fused_norm_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/norm_body.h"

namespace dtensor::cuda {

// RMSNorm of the `rows` contiguous rows of `width`; `weight` may be null.
cudaError_t LaunchRmsNorm(ScalarType type, const void* x, const void* weight,
                          void* out, int64_t rows, int64_t width, double eps,
                          cudaStream_t stream);
// LayerNorm of the `rows` contiguous rows of `width`; `weight` and `bias` may
// be null.
cudaError_t LaunchLayerNorm(ScalarType type, const void* x, const void* weight,
                            const void* bias, void* out, int64_t rows,
                            int64_t width, double eps, cudaStream_t stream);

// The fused residual add + RMSNorm (fused_norm_body.h) of the `rows`
// contiguous rows of `width` of residual and delta: writes sum = residual +
// delta and out = rmsnorm(sum) * weight (`weight` may be null), one block per
// row, in packs of 16 bytes when every pointer is 16-byte aligned and a row
// is a whole number of packs, else element by element.
cudaError_t LaunchAddRmsNorm(ScalarType type, const void* residual,
                             const void* delta, const void* weight, void* sum,
                             void* out, int64_t rows, int64_t width, double eps,
                             cudaStream_t stream);

// The operands of LaunchNormBackward: contiguous x and grad [rows, width] of
// `type` (floating), and the outputs.
struct NormBackwardArgs {
  const void* x = nullptr;
  const void* grad = nullptr;
  const void* weight = nullptr;  // [width]; null: ones.
  // [rows, width], added to dx (norm_body.h's NormBackwardWrite); null: none.
  const void* addend = nullptr;
  void* dx = nullptr;       // [rows, width]
  void* dweight = nullptr;  // [width]; null: not wanted.
  void* dbias = nullptr;    // [width]; null: not wanted.
  // Scratch: each row's statistics [rows], and the per-chunk partial sums
  // [2, NormParamChunks(rows), width] (norm_body.h; dweight's, then dbias's)
  // when a parameter gradient is wanted.
  NormStats* stats = nullptr;
  double* partials = nullptr;
  int64_t rows = 0;
  int64_t width = 0;
  double eps = 0;
  bool layer_norm = false;
};

// dx by one block per row (which also writes the row's statistics), then the
// wanted parameter gradients: the partial sums of the chunks, then their sums,
// rounded to `type`. Requires rows > 0 and width > 0.
cudaError_t LaunchNormBackward(ScalarType type, const NormBackwardArgs& args,
                               cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_NORM_KERNELS_H_
