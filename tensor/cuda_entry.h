#ifndef DTENSOR_TENSOR_CUDA_ENTRY_H_
#define DTENSOR_TENSOR_CUDA_ENTRY_H_

#include "dtensor/tensor/tensor.h"

// The CUDA entry points of the tensor kernels: what the CPU entry points of
// dtensor/tensor/ (Add, Matmul, Softmax, ...) call when an operand lives on a
// CUDA device. Each op family declares its own beside its CPU kernels, in
// <family>_cuda.h (elementwise_cuda.h, reduction_cuda.h, matmul_cuda.h,
// nn_functional_cuda.h, norm_cuda.h, loss_cuda.h, indexing_cuda.h,
// attention_cuda.h, adamw_cuda.h, tensor_copies_cuda.h), and defines them in
// <family>_cuda.cc with the shared steps of cuda_launch.h. Semantics, dtypes
// and results are those of the CPU kernels, computed by the device kernels of
// dtensor/tensor/cuda/ on the device's stream (so results can differ from the
// CPU in the last bits where the device's math functions or summation order
// differ). Errors: what the CPU kernel reports; operands on different CUDA
// devices; without --config=cuda, every entry point (FailedPrecondition).
//
// The <family>_cuda.cc files are compiled in every build: the body of each
// entry point is its CUDA code under `#ifdef DTENSOR_CUDA` (defined for the
// tensor library by --config=cuda) and otherwise returns NotBuilt()
// (cuda_backend.h), so that a signature is written once.
namespace dtensor::cuda {

// True when `t` is defined and on a CUDA device.
inline bool OnCuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ENTRY_H_
