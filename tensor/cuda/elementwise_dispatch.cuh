#ifndef DTENSOR_TENSOR_CUDA_ELEMENTWISE_DISPATCH_CUH_
#define DTENSOR_TENSOR_CUDA_ELEMENTWISE_DISPATCH_CUH_

// The dispatch of an elementwise op to its kernel, shared by the launch files
// of the elementwise maps (elementwise_kernels.cu, with tensor operands, and
// elementwise_scalar_kernels.cu, with a scalar operand by value). CUDA only
// (nvcc).

#include <cuda_runtime_api.h>

#include <type_traits>

#include "dtensor/tensor/cuda/elementwise_body.h"

namespace dtensor::cuda {

// The op as a compile-time constant: one kernel per op.
template <UnaryOp kOp>
using UnaryTag = std::integral_constant<UnaryOp, kOp>;
template <BinaryOp kOp>
using BinaryTag = std::integral_constant<BinaryOp, kOp>;

// Calls fn(UnaryTag<op>{}).
template <typename Fn>
cudaError_t DispatchUnaryOp(UnaryOp op, Fn&& fn) {
  switch (op) {
#define DT_UNARY_CASE(enumerator) \
  case UnaryOp::enumerator:       \
    return fn(UnaryTag<UnaryOp::enumerator>{});
    DT_CUDA_FOR_EACH_UNARY_OP(DT_UNARY_CASE)
#undef DT_UNARY_CASE
  }
  return cudaErrorInvalidValue;
}

template <typename Fn>
cudaError_t DispatchBinaryOp(BinaryOp op, Fn&& fn) {
  switch (op) {
#define DT_BINARY_CASE(enumerator) \
  case BinaryOp::enumerator:       \
    return fn(BinaryTag<BinaryOp::enumerator>{});
    DT_CUDA_FOR_EACH_BINARY_OP(DT_BINARY_CASE)
#undef DT_BINARY_CASE
  }
  return cudaErrorInvalidValue;
}

template <typename T>
constexpr bool kFloating = std::is_floating_point_v<Compute<T>>;
template <typename T>
constexpr bool kBool = std::is_same_v<T, bool>;

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ELEMENTWISE_DISPATCH_CUH_
