#ifndef DTENSOR_TENSOR_SWIGLU_H_
#define DTENSOR_TENSOR_SWIGLU_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The gate of a SwiGLU feed-forward, silu(a) * b, in one pass: one read of
// each input and one write, computed in f32 for bf16 and f16 (no rounding of
// silu(a) before the product). Inputs may be any strided views; the result is
// contiguous. CUDA operands run on the device (swiglu_cuda.h).
// Errors: a and b of different shapes, dtypes or devices; a non-floating
// dtype.
absl::StatusOr<Tensor> SwiGlu(const Tensor& a, const Tensor& b);

// The gradients of SwiGlu(a, b) for the output's gradient `grad`.
struct SwiGluGrads {
  Tensor a;  // grad * b * silu'(a)
  Tensor b;  // grad * silu(a)
};

// Both gradients in one pass (one sigmoid per element).
// Errors: grad, a and b of different shapes, dtypes or devices; a
// non-floating dtype.
absl::StatusOr<SwiGluGrads> SwiGluBackward(const Tensor& grad, const Tensor& a,
                                           const Tensor& b);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_SWIGLU_H_
