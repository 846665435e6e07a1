#ifndef DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_
#define DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensor/cuda/elementwise_body.h"
#include "tensor/cuda/row_body.h"
#include "tensor/nn_functional.h"
#include "tensor/tensor.h"

// The tensor kernels on CUDA tensors: what the CPU entry points of tensor/
// (Add, Matmul, Softmax, ...) call when an operand lives on a CUDA device.
// Semantics, dtypes and results are those of the CPU kernels, computed by the
// device kernels of tensor/cuda/ on the device's stream (so results can
// differ from the CPU in the last bits where the device's math functions or
// summation order differ). A CPU operand of a binary op (a scalar) is copied
// to the device.
// Errors: what the CPU kernel reports; operands on different CUDA devices;
// without --config=cuda, every function (FailedPrecondition).
namespace dtensor::cuda {

// True when `t` is defined and on a CUDA device.
inline bool OnCuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

absl::StatusOr<Tensor> UnaryOnDevice(UnaryOp op, absl::string_view name,
                                     const Tensor& x);
absl::StatusOr<Tensor> BinaryOnDevice(BinaryOp op, absl::string_view name,
                                      const Tensor& a, const Tensor& b);
// Copies `src` (already of dst's shape, any strides, any dtype, on dst's
// device) into `dst`, converting the dtype.
absl::Status CopyOnDevice(const Tensor& src, const Tensor& dst);
absl::StatusOr<Tensor> MatmulOnDevice(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> SoftmaxOnDevice(const Tensor& x, int64_t dim, bool log);
absl::StatusOr<Tensor> RmsNormOnDevice(const Tensor& x, const Tensor& weight,
                                       double eps);
// Sum (mean when `mean`), max or min over `dims` (empty: all).
absl::StatusOr<Tensor> ReduceOnDevice(ReduceOp op, bool mean,
                                      absl::string_view name, const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      bool keepdim);
absl::StatusOr<Tensor> EmbeddingOnDevice(const Tensor& indices,
                                         const Tensor& table);
absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor& logits,
                                            const Tensor& target,
                                            Reduction reduction,
                                            int64_t ignore_index);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_
