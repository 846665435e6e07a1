#ifndef DTENSOR_TENSOR_ELEMENTWISE_H_
#define DTENSOR_TENSOR_ELEMENTWISE_H_

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Elementwise kernels with NumPy broadcasting. Inputs may be any strided
// views. The result is contiguous, of the input dtype (comparisons give
// kBool). bf16 and f16 compute in f32; integer division truncates toward
// zero.
// Errors: binary operands of different dtypes (naming both) or shapes that do
// not broadcast; an integer division by zero; a transcendental op (exp, log,
// sqrt, rsqrt, pow, gelu, silu, sigmoid, tanh) on a non-floating dtype;
// arithmetic on bool; an operand on a device the kernel does not run on.
//
// Bool tensors take comparisons, Maximum/Minimum (or/and) and Where;
// the arithmetic ops (Add, Sub, Mul, Div, Neg, Abs, Relu) reject bool.
// Integer +, -, *, negation and min / -1 wrap around. Maximum, Minimum and
// Relu propagate NaN, like torch. CUDA operands run on the device
// (cuda_backend_ops.h).

// The broadcast shape of `a` and `b`.
// Errors: shapes that do not broadcast (naming both).
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b);

absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Div(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Pow(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Maximum(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Minimum(const Tensor& a, const Tensor& b);
// grad * silu'(x) = grad s (1 + x (1 - s)), s = sigmoid(x): SiLU's backward
// in one pass (PyTorch's silu_backward). Floating dtypes; broadcasts as Mul.
absl::StatusOr<Tensor> SiluBackward(const Tensor& grad, const Tensor& x);

// Scalar forms: the scalar takes the tensor's dtype (converted as
// Tensor::Scalar does: 2.7 becomes 2 for an integer tensor). This holds for
// the comparison scalar forms below as well.
absl::StatusOr<Tensor> Add(const Tensor& a, double b);
absl::StatusOr<Tensor> Sub(const Tensor& a, double b);
absl::StatusOr<Tensor> Mul(const Tensor& a, double b);
absl::StatusOr<Tensor> Div(const Tensor& a, double b);
absl::StatusOr<Tensor> Pow(const Tensor& a, double exponent);

absl::StatusOr<Tensor> Neg(const Tensor& a);
absl::StatusOr<Tensor> Abs(const Tensor& a);
// Exp, and the exp inside Silu and Sigmoid (and Softmax, nn_functional.h),
// is vectorized for f32, bf16 and f16 (cuda::FastExp,
// dtensor/tensor/cuda/fast_exp.h): within 2 ulp of the correctly rounded f32
// exp (1 ulp measured over the whole range), exact at 0, +-inf and nan; f64
// uses std::exp.
absl::StatusOr<Tensor> Exp(const Tensor& a);
absl::StatusOr<Tensor> Log(const Tensor& a);
absl::StatusOr<Tensor> Sqrt(const Tensor& a);
absl::StatusOr<Tensor> Rsqrt(const Tensor& a);
absl::StatusOr<Tensor> Relu(const Tensor& a);
enum class GeluApproximation { kNone, kTanh };
// kNone: x·Φ(x) with erf; kTanh: the tanh approximation.
absl::StatusOr<Tensor> Gelu(const Tensor& a, GeluApproximation approximation =
                                                 GeluApproximation::kNone);
absl::StatusOr<Tensor> Silu(const Tensor& a);
absl::StatusOr<Tensor> Sigmoid(const Tensor& a);
absl::StatusOr<Tensor> Tanh(const Tensor& a);

// Comparisons give kBool.
absl::StatusOr<Tensor> Eq(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Ne(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Lt(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Le(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Gt(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Ge(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Eq(const Tensor& a, double b);
absl::StatusOr<Tensor> Ne(const Tensor& a, double b);
absl::StatusOr<Tensor> Lt(const Tensor& a, double b);
absl::StatusOr<Tensor> Le(const Tensor& a, double b);
absl::StatusOr<Tensor> Gt(const Tensor& a, double b);
absl::StatusOr<Tensor> Ge(const Tensor& a, double b);

// cond ? a : b, all three broadcast together.
// Errors: `cond` not kBool; what the binary ops report.
absl::StatusOr<Tensor> Where(const Tensor& cond, const Tensor& a,
                             const Tensor& b);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_ELEMENTWISE_H_
