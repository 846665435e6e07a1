#ifndef DTENSOR_TENSOR_ELEMENTWISE_CUDA_H_
#define DTENSOR_TENSOR_ELEMENTWISE_CUDA_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// The elementwise kernels of elementwise.h on CUDA tensors (cuda_entry.h). A
// CPU operand of a binary op (a scalar) is copied to the device.
namespace dtensor::cuda {

absl::StatusOr<Tensor> UnaryOnDevice(UnaryOp op, absl::string_view name,
                                     const Tensor& x);
absl::StatusOr<Tensor> BinaryOnDevice(BinaryOp op, absl::string_view name,
                                      const Tensor& a, const Tensor& b);
// cond ? a : b broadcast to `shape` (the checked broadcast of the three);
// CPU operands are copied to the device of the CUDA ones.
absl::StatusOr<Tensor> WhereOnDevice(const Tensor& cond, const Tensor& a,
                                     const Tensor& b, const Shape& shape);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_ELEMENTWISE_CUDA_H_
