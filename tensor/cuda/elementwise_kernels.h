#ifndef DTENSOR_TENSOR_CUDA_ELEMENTWISE_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_ELEMENTWISE_KERNELS_H_

// Launches of the elementwise kernels on a stream (elementwise_body.h's
// math). Each returns the launch error (cudaSuccess when the launch was
// accepted); pointers are device pointers.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// out = op(x) over `numel` elements laid out by `shape` (operand 0: out,
// 1: x); `out_type` is `in_type`, or kBool for comparisons.
cudaError_t LaunchUnary(UnaryOp op, ScalarType in_type, ScalarType out_type,
                        const void* x, void* out, const StridedShape<2>& shape,
                        int64_t numel, cudaStream_t stream);

// out = op(a, b) (operands 0: out, 1: a, 2: b).
cudaError_t LaunchBinary(BinaryOp op, ScalarType in_type, ScalarType out_type,
                         const void* a, const void* b, void* out,
                         const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream);

// out = cond ? a : b elementwise (operands 0: out, 1: cond, 2: a, 3: b), a
// and b of `type`.
cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ELEMENTWISE_KERNELS_H_
