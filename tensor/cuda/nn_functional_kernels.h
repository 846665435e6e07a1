#ifndef DTENSOR_TENSOR_CUDA_NN_FUNCTIONAL_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_NN_FUNCTIONAL_KERNELS_H_

// Launches of the nn function kernels on a stream: softmax and the rotary
// embedding (row_body.h) and dropout (random_body.h). Each returns the launch
// error (cudaSuccess when the launch was accepted); pointers are device
// pointers.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// Softmax (or log-softmax) of contiguous x seen as [outer, n, inner] along n.
cudaError_t LaunchSoftmax(ScalarType type, const void* x, void* out,
                          int64_t outer, int64_t n, int64_t inner, bool log,
                          cudaStream_t stream);

// Rotary embedding of contiguous x [outer, seq, heads, 2 * half] with
// contiguous f64 tables cos/sin [seq, half].
cudaError_t LaunchRotary(ScalarType type, const void* x, void* out,
                         const double* cos_table, const double* sin_table,
                         int64_t outer, int64_t seq, int64_t heads,
                         int64_t half, cudaStream_t stream);

// Dropout of contiguous x into contiguous out, `numel` elements
// (random_body.h's DropoutElement); scale = 1 / (1 - p).
cudaError_t LaunchDropout(ScalarType type, const void* x, void* out,
                          const StridedShape<1>& positions, uint64_t base,
                          uint64_t seed, double p, double scale, int64_t numel,
                          cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_NN_FUNCTIONAL_KERNELS_H_
