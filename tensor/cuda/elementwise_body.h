#ifndef DTENSOR_TENSOR_CUDA_ELEMENTWISE_BODY_H_
#define DTENSOR_TENSOR_CUDA_ELEMENTWISE_BODY_H_

// Per-element bodies of the elementwise kernels, shared by the CUDA launches
// and their host forms. The math follows dtensor/tensor/elementwise.cc:
// bf16/f16 compute in float, integer +, -, * and negation wrap,
// Maximum/Minimum/Relu propagate NaN.

#include <stdint.h>

#include <type_traits>

#include "dtensor/tensor/cuda/fast_exp.h"
#include "dtensor/tensor/cuda/fast_log.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// The ops, as X(enumerator) lists: the one table that the enums and the
// launches' dispatch of an op to its kernel (elementwise_kernels.cu) are
// written from.
#define DT_CUDA_FOR_EACH_UNARY_OP(X) \
  X(kNeg)                            \
  X(kAbs)                            \
  X(kExp)                            \
  X(kLog)                            \
  X(kSqrt)                           \
  X(kRsqrt)                          \
  X(kRelu)                           \
  X(kGeluErf)                        \
  X(kGeluTanh)                       \
  X(kSilu)                           \
  X(kSigmoid)                        \
  X(kTanh)

#define DT_CUDA_FOR_EACH_BINARY_OP(X) \
  X(kAdd)                             \
  X(kSub)                             \
  X(kMul)                             \
  X(kDiv)                             \
  X(kPow)                             \
  X(kMaximum)                         \
  X(kMinimum)                         \
  X(kEq)                              \
  X(kNe)                              \
  X(kLt)                              \
  X(kLe)                              \
  X(kGt)                              \
  X(kGe)                              \
  X(kSiluBackward)

#define DT_CUDA_OP_ENUMERATOR(enumerator) enumerator,
enum class UnaryOp { DT_CUDA_FOR_EACH_UNARY_OP(DT_CUDA_OP_ENUMERATOR) };
enum class BinaryOp { DT_CUDA_FOR_EACH_BINARY_OP(DT_CUDA_OP_ENUMERATOR) };
#undef DT_CUDA_OP_ENUMERATOR

// True for the ops that give bool.
DT_HOST_DEVICE constexpr bool IsComparison(BinaryOp op) {
  return op == BinaryOp::kEq || op == BinaryOp::kNe || op == BinaryOp::kLt ||
         op == BinaryOp::kLe || op == BinaryOp::kGt || op == BinaryOp::kGe;
}

// Whether `op` takes operands of a floating (`floating`), bool (`boolean`)
// or else integer dtype: the entry points reject the others, and the
// launches instantiate no kernel for them. Integers take negation, abs and
// relu; bool nothing.
DT_HOST_DEVICE constexpr bool UnaryTakes(UnaryOp op, bool floating,
                                         bool boolean) {
  return floating || (!boolean && (op == UnaryOp::kNeg || op == UnaryOp::kAbs ||
                                   op == UnaryOp::kRelu));
}

// Integers take all but pow and silu_backward (division truncates); bool the
// comparisons, maximum (or) and minimum (and).
DT_HOST_DEVICE constexpr bool BinaryTakes(BinaryOp op, bool floating,
                                          bool boolean) {
  if (floating) return true;
  if (boolean) {
    return IsComparison(op) || op == BinaryOp::kMaximum ||
           op == BinaryOp::kMinimum;
  }
  return op != BinaryOp::kPow && op != BinaryOp::kSiluBackward;
}

// Float and double forms of the math functions, so that a body names one
// function for both (the host forms call the same libm functions as the CPU
// kernels).
// Name(float) calls libm's `fn` with the C suffix f (expf), Name(double) `fn`.
#define DT_FLOAT_AND_DOUBLE(Name, fn)                            \
  DT_HOST_DEVICE inline float Name(float x) { return fn##f(x); } \
  DT_HOST_DEVICE inline double Name(double x) { return fn(x); }
DT_FLOAT_AND_DOUBLE(Exp, exp)
DT_FLOAT_AND_DOUBLE(Log, log)
DT_FLOAT_AND_DOUBLE(Sqrt, sqrt)
DT_FLOAT_AND_DOUBLE(Erf, erf)
DT_FLOAT_AND_DOUBLE(Tanh, tanh)
DT_FLOAT_AND_DOUBLE(Fabs, fabs)
#undef DT_FLOAT_AND_DOUBLE
DT_HOST_DEVICE inline float Pow(float x, float y) { return powf(x, y); }
DT_HOST_DEVICE inline double Pow(double x, double y) { return pow(x, y); }

// grad * silu'(x) = grad s (1 + x (1 - s)) with s = sigmoid(x): SiLU's
// backward in one pass (floating C).
template <typename C>
DT_HOST_DEVICE inline C SiluBackwardOf(C grad, C x) {
  const C s = C(1) / (C(1) + FastExpOf(-x));
  return grad * s * (C(1) + x * (C(1) - s));
}

// silu(a) * b = a b / (1 + exp(-a)): the gate of a SwiGLU feed-forward
// (floating C), in one pass with no rounding between the two.
template <typename C>
DT_HOST_DEVICE inline C SwiGluOf(C a, C b) {
  return a / (C(1) + FastExpOf(-a)) * b;
}

// SwiGluOf's gradients for the output's gradient g: d/da = g b silu'(a)
// (SiluBackwardOf's formula) and d/db = g silu(a), one sigmoid for both.
template <typename C>
DT_HOST_DEVICE inline void SwiGluBackwardOf(C g, C a, C b, C* da, C* db) {
  const C s = C(1) / (C(1) + FastExpOf(-a));
  *da = g * b * s * (C(1) + a * (C(1) - s));
  *db = g * a * s;
}

// x + y (op 0), x - y (1) or x * y (2) wrapping around for integer C (bool
// ops are rejected before launch; it only needs to compile for them).
template <typename C>
DT_HOST_DEVICE inline C Wrapping(C x, C y, int op) {
  using U = std::make_unsigned_t<
      std::conditional_t<std::is_same_v<C, bool>, unsigned char, C>>;
  const U a = static_cast<U>(x);
  const U b = static_cast<U>(y);
  return static_cast<C>(op == 0 ? a + b : op == 1 ? a - b : a * b);
}

// op(x) in compute type C (float, double or an integer type).
template <typename C>
DT_HOST_DEVICE inline C ApplyUnary(UnaryOp op, C x) {
  if constexpr (std::is_integral_v<C>) {
    switch (op) {
      case UnaryOp::kNeg:
        return Wrapping<C>(0, x, 1);
      case UnaryOp::kAbs:
        return x < 0 ? Wrapping<C>(0, x, 1) : x;
      case UnaryOp::kRelu:
        return x < 0 ? C(0) : x;
      default:
        return x;  // The other ops are rejected for integers before launch.
    }
  } else {
    switch (op) {
      case UnaryOp::kNeg:
        return -x;
      case UnaryOp::kAbs:
        return Fabs(x);
      case UnaryOp::kExp:
        return FastExpOf(x);
      case UnaryOp::kLog:
        return FastLogOf(x);
      case UnaryOp::kSqrt:
        return Sqrt(x);
      case UnaryOp::kRsqrt:
        return C(1) / Sqrt(x);
      case UnaryOp::kRelu:
        return x < C(0) ? C(0) : x;
      case UnaryOp::kGeluErf:
        return C(0.5) * x * (C(1) + Erf(x * C(0.70710678118654752440)));
      case UnaryOp::kGeluTanh: {
        const C inner =
            C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
        return C(0.5) * x * (C(1) + Tanh(inner));
      }
      case UnaryOp::kSilu:
        return x / (C(1) + FastExpOf(-x));
      case UnaryOp::kSigmoid:
        return C(1) / (C(1) + FastExpOf(-x));
      case UnaryOp::kTanh:
        return Tanh(x);
    }
    return x;
  }
}

// op(x, y) in compute type C; comparisons give 1 or 0.
template <typename C>
DT_HOST_DEVICE inline C ApplyBinary(BinaryOp op, C x, C y) {
  switch (op) {
    case BinaryOp::kAdd:
      if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
        return Wrapping<C>(x, y, 0);
      }
      return x + y;
    case BinaryOp::kSub:
      if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
        return Wrapping<C>(x, y, 1);
      }
      return x - y;
    case BinaryOp::kMul:
      if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
        return Wrapping<C>(x, y, 2);
      }
      return x * y;
    case BinaryOp::kDiv:
      if constexpr (std::is_integral_v<C>) {
        // A zero divisor fails the op (its entry point checks the divisors;
        // the device gives some value first).
        if constexpr (!std::is_same_v<C, bool>) {
          return y == C(-1) ? Wrapping<C>(0, x, 1) : x / y;
        }
        return x;
      } else {
        return x / y;
      }
    case BinaryOp::kPow:
      if constexpr (std::is_integral_v<C>) {
        return x;  // Rejected for integers before launch.
      } else {
        return Pow(x, y);
      }
    case BinaryOp::kMaximum:
      return (x > y || x != x) ? x : y;
    case BinaryOp::kMinimum:
      return (x < y || x != x) ? x : y;
    case BinaryOp::kEq:
      return x == y;
    case BinaryOp::kNe:
      return x != y;
    case BinaryOp::kLt:
      return x < y;
    case BinaryOp::kLe:
      return x <= y;
    case BinaryOp::kGt:
      return x > y;
    case BinaryOp::kGe:
      return x >= y;
    case BinaryOp::kSiluBackward:
      if constexpr (std::is_integral_v<C>) {
        return x;  // Rejected for integers before launch.
      } else {
        return SiluBackwardOf(x, y);
      }
  }
  return x;
}

// Dims and element strides of up to kOperands operands over one iteration
// shape (broadcast operands have stride 0), in index type Index (int64_t, or
// int32_t where the launch checked that every offset fits). The host merges
// dims that are contiguous in every operand first, so most launches see one
// or two dims.
constexpr int kMaxDims = 8;

template <int kOperands, typename Index = int64_t>
struct StridedShape {
  int ndim = 0;
  Index sizes[kMaxDims] = {};
  Index strides[kOperands][kMaxDims] = {};
};

template <typename T>
struct SameType {
  using type = T;
};

// The element offset of each operand at row-major position `linear`.
template <int kOperands, typename Index>
DT_HOST_DEVICE inline void OperandOffsetsAt(
    const StridedShape<kOperands, Index>& s,
    typename SameType<Index>::type linear, Index (&offsets)[kOperands]) {
  for (int k = 0; k < kOperands; ++k) offsets[k] = 0;
  for (int d = s.ndim - 1; d >= 0; --d) {
    const Index size = s.sizes[d];
    const Index index = linear % size;
    linear /= size;
    for (int k = 0; k < kOperands; ++k) offsets[k] += index * s.strides[k][d];
  }
}

// Bit k set when operand k's innermost stride is 0: one value along each row.
template <int kOperands, typename Index>
DT_HOST_DEVICE inline unsigned InnerBroadcastMask(
    const StridedShape<kOperands, Index>& s) {
  unsigned mask = 0;
  if (s.ndim == 0) return mask;
  for (int k = 0; k < kOperands; ++k) {
    if (s.strides[k][s.ndim - 1] == 0) mask |= 1u << k;
  }
  return mask;
}

// Whether a map over `s` may move `vec` elements at a time along the
// innermost dim (a row), which is what a broadcast operand such as a bias
// [C] against [N, C] needs to run at bandwidth: the row's size a multiple of
// `vec`; every operand's innermost stride 1, or 0 for an input (its one value
// repeated along the row; the first `outputs` operands are written and need
// 1); each stride-1 operand's outer strides multiples of `vec`. Then the
// elements [v vec, (v + 1) vec) of the iteration sit at offsets o, o + 1, ...,
// o + vec - 1 of each stride-1 operand with o = OperandOffsetsAt(v vec) a
// multiple of `vec` (a whole vector when the data is aligned to one), and at
// o itself of each stride-0 operand.
template <int kOperands, typename Index>
DT_HOST_DEVICE inline bool RowVectorizable(
    const StridedShape<kOperands, Index>& s, int vec, int outputs) {
  if (s.ndim == 0 || vec <= 1 || s.sizes[s.ndim - 1] % vec != 0) return false;
  for (int k = 0; k < kOperands; ++k) {
    const Index inner = s.strides[k][s.ndim - 1];
    if (inner == 0 && k >= outputs) continue;
    if (inner != 1) return false;
    for (int d = 0; d + 1 < s.ndim; ++d) {
      if (s.strides[k][d] % vec != 0) return false;
    }
  }
  return true;
}

// out[0] = op(x[0]) converted to Out.
template <typename Out, typename T>
DT_HOST_DEVICE inline void UnaryElement(UnaryOp op, const T* x, Out* out) {
  *out = Store<Out>(ApplyUnary(op, Load(*x)));
}

template <typename Out, typename T>
DT_HOST_DEVICE inline void BinaryElement(BinaryOp op, const T* x, const T* y,
                                         Out* out) {
  *out = Store<Out>(ApplyBinary(op, Load(*x), Load(*y)));
}

// BinaryElement with one operand a scalar `s` passed by value (a kernel
// argument, never device memory): op(s, *x) when `scalar_first`, else
// op(*x, s). The same math as BinaryElement on a tensor holding s.
template <typename Out, typename T>
DT_HOST_DEVICE inline void BinaryScalarElement(BinaryOp op, const T* x,
                                               const T& s, bool scalar_first,
                                               Out* out) {
  if (scalar_first) {
    BinaryElement(op, &s, x, out);
  } else {
    BinaryElement(op, x, &s, out);
  }
}

// cond ? a : b with one of a and b the scalar `s` passed by value: a when
// `scalar_is_a`, else b; the other is *x.
template <typename T>
DT_HOST_DEVICE inline void WhereScalarElement(const bool* cond, const T* x,
                                              const T& s, bool scalar_is_a,
                                              T* out) {
  if (*cond) {
    *out = scalar_is_a ? s : *x;
  } else {
    *out = scalar_is_a ? *x : s;
  }
}

// The dtype conversion of dtensor/tensor/convert.h.
template <typename To, typename From>
DT_HOST_DEVICE inline void CastElement(const From* x, To* out) {
  if constexpr (std::is_same_v<To, From>) {
    *out = *x;
  } else {
    *out = Store<To>(Load(*x));
  }
}

// out[0] = silu(a[0]) * b[0] in T's compute type.
template <typename T>
DT_HOST_DEVICE inline void SwiGluElement(const T* a, const T* b, T* out) {
  *out = Store<T>(SwiGluOf(Load(*a), Load(*b)));
}

// da[0], db[0] = SwiGluBackwardOf(g[0], a[0], b[0]) in T's compute type.
template <typename T>
DT_HOST_DEVICE inline void SwiGluBackwardElement(const T* g, const T* a,
                                                 const T* b, T* da, T* db) {
  Compute<T> grad_a, grad_b;
  SwiGluBackwardOf(Load(*g), Load(*a), Load(*b), &grad_a, &grad_b);
  *da = Store<T>(grad_a);
  *db = Store<T>(grad_b);
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ELEMENTWISE_BODY_H_
