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
// 1: x), both of `type`; an invalid value for a type that UnaryTakes
// rejects.
cudaError_t LaunchUnary(UnaryOp op, ScalarType type, const void* x, void* out,
                        const StridedShape<2>& shape, int64_t numel,
                        cudaStream_t stream);

// out = op(a, b) (operands 0: out, 1: a, 2: b), a and b of `type`, out of
// `type` or bool for the comparisons; an invalid value for a type that
// BinaryTakes rejects.
cudaError_t LaunchBinary(BinaryOp op, ScalarType type, const void* a,
                         const void* b, void* out, const StridedShape<3>& shape,
                         int64_t numel, cudaStream_t stream);

// out = op(s, x) when `scalar_first`, else op(x, s) (operands 0: out, 1: x),
// s the one element of `type` at host address `scalar`, read at the launch
// and passed by value: no copy to the device. Else as LaunchBinary.
cudaError_t LaunchBinaryScalar(BinaryOp op, ScalarType type, const void* x,
                               const void* scalar, bool scalar_first, void* out,
                               const StridedShape<2>& shape, int64_t numel,
                               cudaStream_t stream);

// out = cond ? a : b elementwise (operands 0: out, 1: cond, 2: a, 3: b), a
// and b of `type`.
cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream);

// out = cond ? a : b with a (when `scalar_is_a`, b otherwise) the one
// element of `type` at host address `scalar`, passed by value, and the other
// x (operands 0: out, 1: cond, 2: x).
cudaError_t LaunchWhereScalar(ScalarType type, const bool* cond, const void* x,
                              const void* scalar, bool scalar_is_a, void* out,
                              const StridedShape<3>& shape, int64_t numel,
                              cudaStream_t stream);

// out = silu(a) * b (operands 0: out, 1: a, 2: b) of a floating `type`.
cudaError_t LaunchSwiGlu(ScalarType type, const void* a, const void* b,
                         void* out, const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream);

// da, db = SwiGluBackwardOf(grad, a, b) (operands 0: da, 1: db, 2: grad,
// 3: a, 4: b) of a floating `type`.
cudaError_t LaunchSwiGluBackward(ScalarType type, const void* grad,
                                 const void* a, const void* b, void* da,
                                 void* db, const StridedShape<5>& shape,
                                 int64_t numel, cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ELEMENTWISE_KERNELS_H_
