#ifndef DTENSOR_TENSOR_CUDA_NORM_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_NORM_KERNELS_H_

// Launches of the backward of RMSNorm and LayerNorm on a stream
// (norm_body.h's math). Pointers are device pointers; each returns the launch
// error (cudaSuccess when every launch was accepted).

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/norm_body.h"

namespace dtensor::cuda {

// The operands of LaunchNormBackward: contiguous x and grad [rows, width] of
// `type` (floating), and the outputs.
struct NormBackwardArgs {
  const void* x = nullptr;
  const void* grad = nullptr;
  const void* weight = nullptr;  // [width]; null: ones.
  void* dx = nullptr;            // [rows, width]
  void* dweight = nullptr;       // [width]; null: not wanted.
  void* dbias = nullptr;         // [width]; null: not wanted.
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
