#ifndef DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_
#define DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_

#include <cstdint>
#include <vector>

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
// CopyOnDevice ordered on `stream` (a cudaStream_t of dst's device, such as a
// communicator's) instead of the device's stream.
absl::Status CopyOnStream(const Tensor& src, const Tensor& dst, void* stream);
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
// cond ? a : b broadcast to `shape` (the checked broadcast of the three);
// CPU operands are copied to the device of the CUDA ones.
absl::StatusOr<Tensor> WhereOnDevice(const Tensor& cond, const Tensor& a,
                                     const Tensor& b, const Shape& shape);
// The attention softmax in place on contiguous f32 or f64 `scores`
// [..., lq, lk]: scaled by `scale`, keys after query i + (lk - lq) at
// probability 0 when `causal` (tensor/nn_functional.cc's MaskedSoftmaxRows).
absl::Status MaskedSoftmaxOnDevice(const Tensor& scores, int64_t lq, int64_t lk,
                                   bool causal, double scale);
// The rotary embedding of x [outer..., seq, heads, 2 * half] with the angle
// tables cos/sin [seq, half] computed on the host.
absl::StatusOr<Tensor> RotaryOnDevice(const Tensor& x,
                                      const std::vector<double>& cos_table,
                                      const std::vector<double>& sin_table);
// Per row of logits [rows, classes] on a CUDA device, in double: `losses`
// (logsumexp - the target's logit; 0 where the target is ignore_index) and
// `log_sum_exp` (every row). Targets other than ignore_index are in range.
absl::Status CrossEntropyRowsOnDevice(const Tensor& logits,
                                      const std::vector<int64_t>& targets,
                                      int64_t ignore_index,
                                      std::vector<double>& losses,
                                      std::vector<double>& log_sum_exp);
absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor& logits,
                                            const Tensor& target,
                                            Reduction reduction,
                                            int64_t ignore_index);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_BACKEND_OPS_H_
