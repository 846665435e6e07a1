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
// (elementwise_cuda.h).

// The broadcast shape of `a` and `b`.
// Errors: shapes that do not broadcast (naming both).
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b);

// The elementwise functions, by signature, as X(T, Name) lists; each is
// declared on Tensor here and on DTensor in dtensor/ops/elementwise_ops.h
// (DTENSOR_DECLARE_ELEMENTWISE below).
// f(a, b), broadcasting a and b:
#define DTENSOR_ELEMENTWISE_BINARY(X, T) \
  X(T, Add)                              \
  X(T, Sub)                              \
  X(T, Mul)                              \
  X(T, Div)                              \
  X(T, Pow)                              \
  X(T, Maximum)                          \
  X(T, Minimum)
// Comparisons f(a, b), giving kBool:
#define DTENSOR_ELEMENTWISE_COMPARISONS(X, T) \
  X(T, Eq)                                    \
  X(T, Ne)                                    \
  X(T, Lt)                                    \
  X(T, Le)                                    \
  X(T, Gt)                                    \
  X(T, Ge)
// Scalar forms f(a, double b): the scalar takes the tensor's dtype (converted
// as Tensor::Scalar does: 2.7 becomes 2 for an integer tensor). Pow's scalar
// is the exponent.
#define DTENSOR_ELEMENTWISE_WITH_SCALAR(X, T) \
  X(T, Add)                                   \
  X(T, Sub)                                   \
  X(T, Mul)                                   \
  X(T, Div)                                   \
  X(T, Pow)                                   \
  DTENSOR_ELEMENTWISE_COMPARISONS(X, T)
// f(a). Exp, and the exp inside Silu and Sigmoid (and Softmax,
// nn_functional.h), is vectorized for f32, bf16 and f16 (cuda::FastExp,
// dtensor/tensor/cuda/fast_exp.h): within 2 ulp of the correctly rounded f32
// exp (1 ulp measured over the whole range), exact at 0, +-inf and nan; f64
// uses std::exp.
#define DTENSOR_ELEMENTWISE_UNARY(X, T) \
  X(T, Neg)                             \
  X(T, Abs)                             \
  X(T, Exp)                             \
  X(T, Log)                             \
  X(T, Sqrt)                            \
  X(T, Rsqrt)                           \
  X(T, Relu)                            \
  X(T, Silu)                            \
  X(T, Sigmoid)                         \
  X(T, Tanh)

#define DTENSOR_DECLARE_BINARY(T, Name) \
  absl::StatusOr<T> Name(const T& a, const T& b);
#define DTENSOR_DECLARE_WITH_SCALAR(T, Name) \
  absl::StatusOr<T> Name(const T& a, double b);
#define DTENSOR_DECLARE_UNARY(T, Name) absl::StatusOr<T> Name(const T& a);
// Declares every function of the four lists on tensor type T.
#define DTENSOR_DECLARE_ELEMENTWISE(T)                            \
  DTENSOR_ELEMENTWISE_BINARY(DTENSOR_DECLARE_BINARY, T)           \
  DTENSOR_ELEMENTWISE_COMPARISONS(DTENSOR_DECLARE_BINARY, T)      \
  DTENSOR_ELEMENTWISE_WITH_SCALAR(DTENSOR_DECLARE_WITH_SCALAR, T) \
  DTENSOR_ELEMENTWISE_UNARY(DTENSOR_DECLARE_UNARY, T)

DTENSOR_DECLARE_ELEMENTWISE(Tensor)

// grad * silu'(x) = grad s (1 + x (1 - s)), s = sigmoid(x): SiLU's backward
// in one pass (PyTorch's silu_backward). Floating dtypes; broadcasts as Mul.
absl::StatusOr<Tensor> SiluBackward(const Tensor& grad, const Tensor& x);

enum class GeluApproximation { kNone, kTanh };
// kNone: x·Φ(x) with erf; kTanh: the tanh approximation.
absl::StatusOr<Tensor> Gelu(const Tensor& a, GeluApproximation approximation =
                                                 GeluApproximation::kNone);

// cond ? a : b, all three broadcast together.
// Errors: `cond` not kBool; what the binary ops report.
absl::StatusOr<Tensor> Where(const Tensor& cond, const Tensor& a,
                             const Tensor& b);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_ELEMENTWISE_H_
