#include "dtensor/tensor/elementwise.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/blocked_loop.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/cuda/fast_exp.h"
#include "dtensor/tensor/cuda/fast_log.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/elementwise_cuda.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/tensor/strided_loop.h"

namespace dtensor {
namespace {

using internal::CheckCpu;
using internal::CheckSameDType;

// The dtypes an op accepts: any, all but bool, or the floating ones.
enum class Domain { kAny, kNumeric, kFloating };

template <typename T>
constexpr bool InDomain(Domain domain) {
  switch (domain) {
    case Domain::kAny:
      return true;
    case Domain::kNumeric:
      return !std::is_same_v<T, bool>;
    case Domain::kFloating:
      return std::is_floating_point_v<ComputeType<T>>;
  }
  return false;
}

// `t` is a defined CPU tensor whose dtype lies in `domain`.
absl::Status CheckOperand(const Tensor& t, Domain domain, absl::string_view op,
                          absl::string_view arg) {
  switch (domain) {
    case Domain::kAny:
      return CheckCpu(t, op, arg);
    case Domain::kNumeric:
      DT_RETURN_IF_ERROR(CheckCpu(t, op, arg));
      if (t.dtype() != DType::kBool) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", arg, " has dtype bool; a numeric dtype is required"));
    case Domain::kFloating:
      return internal::CheckFloatingCpu(t, op, arg);
  }
  return absl::OkStatus();
}

// DispatchDType for a dtype already checked against `kDomain`: `fn` is only
// instantiated for the types of the domain.
template <Domain kDomain, typename Fn>
decltype(auto) DispatchInDomain(DType dtype, Fn&& fn) {
  return DispatchDType(dtype, [&fn](auto tag) -> decltype(auto) {
    if constexpr (InDomain<decltype(tag)>(kDomain)) {
      return fn(tag);
    } else {
      return fn(float{});  // Unreachable for a checked dtype.
    }
  });
}

// ---- The ops, as functors on the compute type C. ----
// Integer +, -, * and negation wrap around (two's complement) where C++ would
// leave the overflow undefined.

template <typename C>
C Negate(C x) {
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(std::make_unsigned_t<C>{0} -
                          static_cast<std::make_unsigned_t<C>>(x));
  } else {
    return -x;
  }
}

// x op y, with op on the unsigned type for integers so that they wrap around.
template <typename C, typename Op>
C WrapAround(C x, C y, Op op) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(op(static_cast<U>(x), static_cast<U>(y)));
  } else {
    return op(x, y);
  }
}

// An op whose value is one expression of x (unary) or of x and y (binary) in
// the compute type C, run on the device as `device_op`, for the dtypes of
// Domain::`domain`.
#define DT_UNARY_OP(Name, device_op, domain, expr)                       \
  struct Name {                                                          \
    static constexpr cuda::UnaryOp kDeviceOp = cuda::UnaryOp::device_op; \
    static constexpr Domain kDomain = Domain::domain;                    \
    template <typename C>                                                \
    C operator()(C x) const {                                            \
      return expr;                                                       \
    }                                                                    \
  };
// Binary ops give `Result`: C, or bool for the comparisons.
#define DT_BINARY_OP_TO(Result, Name, device_op, domain, expr)             \
  struct Name {                                                            \
    static constexpr cuda::BinaryOp kDeviceOp = cuda::BinaryOp::device_op; \
    static constexpr Domain kDomain = Domain::domain;                      \
    template <typename C>                                                  \
    Result operator()(C x, C y) const {                                    \
      return expr;                                                         \
    }                                                                      \
  };
#define DT_BINARY_OP(Name, device_op, domain, expr) \
  DT_BINARY_OP_TO(C, Name, device_op, domain, expr)
// Comparisons accept every dtype.
#define DT_COMPARISON_OP(Name, device_op, expr) \
  DT_BINARY_OP_TO(bool, Name, device_op, kAny, expr)

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;

DT_BINARY_OP(AddOp, kAdd, kNumeric, WrapAround(x, y, std::plus<>()))
DT_BINARY_OP(SubOp, kSub, kNumeric, AddOp()(x, Negate(y)))
DT_BINARY_OP(MulOp, kMul, kNumeric, WrapAround(x, y, std::multiplies<>()))
// Integer divisors are checked to be non-zero before this runs.
struct DivOp {
  static constexpr cuda::BinaryOp kDeviceOp = cuda::BinaryOp::kDiv;
  static constexpr Domain kDomain = Domain::kNumeric;
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>) {
      return y == -1 ? Negate(x) : x / y;  // min / -1 overflows.
    } else {
      return x / y;
    }
  }
};

DT_BINARY_OP(PowOp, kPow, kFloating, std::pow(x, y))
// x: the gradient, y: SiLU's input.
DT_BINARY_OP(SiluBackwardOp, kSiluBackward, kFloating,
             cuda::SiluBackwardOf(x, y))
// Maximum and Minimum propagate NaN, like torch.maximum.
DT_BINARY_OP(MaximumOp, kMaximum, kAny, (x > y || x != x) ? x : y)
DT_BINARY_OP(MinimumOp, kMinimum, kAny, (x < y || x != x) ? x : y)

DT_UNARY_OP(NegOp, kNeg, kNumeric, Negate(x))
struct AbsOp {
  static constexpr cuda::UnaryOp kDeviceOp = cuda::UnaryOp::kAbs;
  static constexpr Domain kDomain = Domain::kNumeric;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return x < 0 ? Negate(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};

DT_UNARY_OP(ExpOp, kExp, kFloating, cuda::FastExpOf(x))
DT_UNARY_OP(LogOp, kLog, kFloating, cuda::FastLogOf(x))
DT_UNARY_OP(SqrtOp, kSqrt, kFloating, std::sqrt(x))
DT_UNARY_OP(RsqrtOp, kRsqrt, kFloating, C(1) / std::sqrt(x))
// NaN stays NaN, like torch.relu.
DT_UNARY_OP(ReluOp, kRelu, kNumeric, x < C(0) ? C(0) : x)
DT_UNARY_OP(GeluErfOp, kGeluErf, kFloating,
            C(0.5) * x * (C(1) + std::erf(x * C(kSqrtHalf))))
DT_UNARY_OP(GeluTanhOp, kGeluTanh, kFloating,
            C(0.5) * x *
                (C(1) +
                 std::tanh(C(kSqrtTwoOverPi) * (x + C(0.044715) * x * x * x))))
DT_UNARY_OP(SigmoidOp, kSigmoid, kFloating, C(1) / (C(1) + cuda::FastExpOf(-x)))
DT_UNARY_OP(SiluOp, kSilu, kFloating, x / (C(1) + cuda::FastExpOf(-x)))
DT_UNARY_OP(TanhOp, kTanh, kFloating, std::tanh(x))

DT_COMPARISON_OP(EqOp, kEq, x == y)
DT_COMPARISON_OP(NeOp, kNe, x != y)
DT_COMPARISON_OP(LtOp, kLt, x < y)
DT_COMPARISON_OP(LeOp, kLe, x <= y)
DT_COMPARISON_OP(GtOp, kGt, x > y)
DT_COMPARISON_OP(GeOp, kGe, x >= y)
#undef DT_COMPARISON_OP
#undef DT_BINARY_OP
#undef DT_BINARY_OP_TO
#undef DT_UNARY_OP

// The storage type an op writes for inputs of storage type T: bool for
// comparisons, T otherwise.
template <typename T, typename Op, typename... Args>
using ResultType =
    std::conditional_t<std::is_same_v<std::invoke_result_t<Op, Args...>, bool>,
                       bool, T>;

// ---- Kernels. `out` is contiguous; the inputs are any strided views of
// out's shape (broadcast inputs are expanded first, with stride 0). Runs with
// unit steps, the common case, go to the *Run and *Block functions, whose
// __restrict parameters and blocked loops the compiler vectorizes; a binary
// op takes 2-D blocks, so that a row- or column-broadcast operand (steps 0
// across rows or along them) keeps the fast path over many short rows. They
// are not inlined because GCC drops what __restrict promises when it inlines
// them. ----

// dst[i] = op(x[i]) for i < count.
template <typename Out, typename T, typename Op>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void UnaryRun(Out* __restrict dst,
                                                       const T* __restrict x,
                                                       int64_t count, Op op) {
  using C = ComputeType<T>;
  ForEachIndexInBlocks(count, [&](int64_t i) {
    dst[i] = ConvertValue<Out>(op(static_cast<C>(x[i])));
  });
}

// A block of `rows` rows of `count` elements: dst[r * rd + j] =
// op(x[r * rx + j * kXStep], y[r * ry + j * kYStep]), (rd, rx, ry) =
// row_steps, steps 1 or 0 (a row- or column-broadcast operand: the same row,
// or one value per row). One call per block, so that short rows (a
// broadcast over a small inner dim) cost no call each.
template <int kXStep, int kYStep, typename Out, typename T, typename Op>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void BinaryBlock(
    Out* __restrict dst, const T* __restrict x, const T* __restrict y,
    int64_t count, int64_t rows, const OperandOffsets<3>& row_steps, Op op) {
  using C = ComputeType<T>;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t d = r * row_steps[0], a = r * row_steps[1],
                  b = r * row_steps[2];
    ForEachIndexInBlocks(count, [&](int64_t j) {
      dst[d + j] = ConvertValue<Out>(op(static_cast<C>(x[a + j * kXStep]),
                                        static_cast<C>(y[b + j * kYStep])));
    });
  }
}

// dst[i] = c[i] ? x[i] : y[i] for i < count.
template <typename T>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void WhereRun(T* __restrict dst,
                                                       const bool* __restrict c,
                                                       const T* __restrict x,
                                                       const T* __restrict y,
                                                       int64_t count) {
  ForEachIndexInBlocks(count, [&](int64_t i) { dst[i] = c[i] ? x[i] : y[i]; });
}

template <typename T, typename Op>
void UnaryKernel(const Tensor& x, const Tensor& out, Op op) {
  using C = ComputeType<T>;
  using Out = ResultType<T, Op, C>;
  const T* const x_data = x.data<T>();
  Out* const out_data = out.data<Out>();
  ForEachStridedRun<2>(x.shape(), {out.strides(), x.strides()}, {0, 0},
                       [&](const OperandOffsets<2>& offsets,
                           const OperandOffsets<2>& steps, int64_t count) {
                         Out* const dst = out_data + offsets[0];
                         const T* const src = x_data + offsets[1];
                         if (steps[0] == 1 && steps[1] == 1) {
                           UnaryRun(dst, src, count, op);
                           return;
                         }
                         for (int64_t i = 0; i < count; ++i) {
                           dst[i * steps[0]] = ConvertValue<Out>(
                               op(static_cast<C>(src[i * steps[1]])));
                         }
                       });
}

template <typename T, typename Op>
void BinaryKernel(const Tensor& a, const Tensor& b, const Tensor& out, Op op) {
  using C = ComputeType<T>;
  using Out = ResultType<T, Op, C, C>;
  const T* const a_data = a.data<T>();
  const T* const b_data = b.data<T>();
  Out* const out_data = out.data<Out>();
  ForEachStridedBlock<3>(
      out.shape(), {out.strides(), a.strides(), b.strides()}, {0, 0, 0},
      [&](const OperandOffsets<3>& offsets, const OperandOffsets<3>& steps,
          int64_t count, const OperandOffsets<3>& row_steps, int64_t rows) {
        Out* const dst = out_data + offsets[0];
        const T* const x = a_data + offsets[1];
        const T* const y = b_data + offsets[2];
        if (steps[0] == 1 && steps[1] == 1 && steps[2] == 1) {
          BinaryBlock<1, 1>(dst, x, y, count, rows, row_steps, op);
        } else if (steps[0] == 1 && steps[1] == 1 && steps[2] == 0) {
          BinaryBlock<1, 0>(dst, x, y, count, rows, row_steps, op);
        } else if (steps[0] == 1 && steps[1] == 0 && steps[2] == 1) {
          BinaryBlock<0, 1>(dst, x, y, count, rows, row_steps, op);
        } else {
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < count; ++i) {
              dst[r * row_steps[0] + i * steps[0]] = ConvertValue<Out>(
                  op(static_cast<C>(x[r * row_steps[1] + i * steps[1]]),
                     static_cast<C>(y[r * row_steps[2] + i * steps[2]])));
            }
          }
        }
      });
}

template <typename T>
void WhereKernel(const Tensor& cond, const Tensor& a, const Tensor& b,
                 const Tensor& out) {
  const bool* const cond_data = cond.data<bool>();
  const T* const a_data = a.data<T>();
  const T* const b_data = b.data<T>();
  T* const out_data = out.data<T>();
  ForEachStridedRun<4>(
      out.shape(), {out.strides(), cond.strides(), a.strides(), b.strides()},
      {0, 0, 0, 0},
      [&](const OperandOffsets<4>& offsets, const OperandOffsets<4>& steps,
          int64_t count) {
        T* const dst = out_data + offsets[0];
        const bool* const c = cond_data + offsets[1];
        const T* const x = a_data + offsets[2];
        const T* const y = b_data + offsets[3];
        if (steps[0] == 1 && steps[1] == 1 && steps[2] == 1 && steps[3] == 1) {
          WhereRun(dst, c, x, y, count);
          return;
        }
        for (int64_t i = 0; i < count; ++i) {
          dst[i * steps[0]] =
              c[i * steps[1]] ? x[i * steps[2]] : y[i * steps[3]];
        }
      });
}

// True when some element of the integer tensor `t` is zero: on the device,
// one comparison and one max reduction there, then the flag to the host.
absl::StatusOr<bool> ContainsZero(const Tensor& t) {
  if (cuda::OnCuda(t)) {
    DT_ASSIGN_OR_RETURN(const Tensor zero, Eq(t, Tensor::Scalar(0, t.dtype())));
    DT_ASSIGN_OR_RETURN(const Tensor any, Max(zero));
    DT_ASSIGN_OR_RETURN(const Tensor flag, any.To(Device::CPU()));
    return flag.data<bool>()[0];
  }
  return DispatchInDomain<Domain::kNumeric>(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* const data = t.data<T>();
    bool found = false;
    ForEachStridedRun<1>(t.shape(), {t.strides()}, {0},
                         [&](const OperandOffsets<1>& offsets,
                             const OperandOffsets<1>& steps, int64_t count) {
                           for (int64_t i = 0; i < count; ++i) {
                             found |= data[offsets[0] + i * steps[0]] == T(0);
                           }
                         });
    return found;
  });
}

// An integer division of `numel` elements by `b` is an error when b holds a
// zero.
absl::Status CheckDivisor(const Tensor& b, int64_t numel) {
  if (IsFloatingPoint(b.dtype()) || numel == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(const bool zero, ContainsZero(b));
  if (!zero) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Div: integer division by zero: the divisor (",
                   std::string(DTypeName(b.dtype())), ", shape ",
                   ShapeToString(b.shape()), ") holds a 0"));
}

// ---- Drivers: argument checks, then the kernel for the dtype. ----

template <typename Op>
absl::StatusOr<Tensor> Unary(absl::string_view name, const Tensor& x, Op op) {
  if (cuda::OnCuda(x)) return cuda::UnaryOnDevice(Op::kDeviceOp, name, x);
  DT_RETURN_IF_ERROR(CheckOperand(x, Op::kDomain, name, "a"));
  return DispatchInDomain<Op::kDomain>(
      x.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        using Out = ResultType<T, Op, ComputeType<T>>;
        DT_ASSIGN_OR_RETURN(Tensor out,
                            Tensor::Empty(x.shape(), CppToDType<Out>()));
        UnaryKernel<T>(x, out, op);
        return out;
      });
}

// Checks `a` and `b` for a binary op on `domain`; returns their broadcast
// shape.
absl::StatusOr<Shape> CheckBinary(absl::string_view name, const Tensor& a,
                                  const Tensor& b, Domain domain) {
  DT_RETURN_IF_ERROR(CheckCpu(a, name, "a"));
  DT_RETURN_IF_ERROR(CheckCpu(b, name, "b"));
  DT_RETURN_IF_ERROR(CheckSameDType(a, b, name, "a", "b"));
  DT_RETURN_IF_ERROR(CheckOperand(a, domain, name, "a"));
  absl::StatusOr<Shape> shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", shape.status().message()));
  }
  return shape;
}

template <typename Op>
absl::StatusOr<Tensor> RunBinary(const Tensor& a, const Tensor& b,
                                 const Shape& shape, Op op) {
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(shape));
  return DispatchInDomain<Op::kDomain>(
      a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        using C = ComputeType<T>;
        using Out = ResultType<T, Op, C, C>;
        DT_ASSIGN_OR_RETURN(Tensor out,
                            Tensor::Empty(shape, CppToDType<Out>()));
        BinaryKernel<T>(a_view, b_view, out, op);
        return out;
      });
}

template <typename Op>
absl::StatusOr<Tensor> Binary(absl::string_view name, const Tensor& a,
                              const Tensor& b, Op op) {
  if (cuda::OnCuda(a) || cuda::OnCuda(b)) {
    return cuda::BinaryOnDevice(Op::kDeviceOp, name, a, b);
  }
  DT_ASSIGN_OR_RETURN(Shape shape, CheckBinary(name, a, b, Op::kDomain));
  return RunBinary(a, b, shape, op);
}

}  // namespace

absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Dims align at the right; a missing dim acts as size 1.
    const int64_t size_a = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t size_b = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (size_a != size_b && size_a != 1 && size_b != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                       " do not broadcast (dim ", rank - 1 - i,
                       " of the result: ", size_a, " vs ", size_b, ")"));
    }
    shape[rank - 1 - i] = size_a == 1 ? size_b : size_a;
  }
  return shape;
}

// The functions of elementwise.h's lists run their op (XOp for X) under
// their own name.
#define DT_DEFINE_BINARY(T, Name)                  \
  absl::StatusOr<T> Name(const T& a, const T& b) { \
    return Binary(#Name, a, b, Name##Op());        \
  }
#define DT_DEFINE_WITH_SCALAR(T, Name)           \
  absl::StatusOr<T> Name(const T& a, double b) { \
    return Name(a, T::Scalar(b, a.dtype()));     \
  }
#define DT_DEFINE_UNARY(T, Name) \
  absl::StatusOr<T> Name(const T& a) { return Unary(#Name, a, Name##Op()); }
DT_DEFINE_BINARY(Tensor, Add)
DT_DEFINE_BINARY(Tensor, Sub)
DT_DEFINE_BINARY(Tensor, Mul)
DT_DEFINE_BINARY(Tensor, Pow)
DT_DEFINE_BINARY(Tensor, Maximum)
DT_DEFINE_BINARY(Tensor, Minimum)
DTENSOR_ELEMENTWISE_COMPARISONS(DT_DEFINE_BINARY, Tensor)
DTENSOR_ELEMENTWISE_WITH_SCALAR(DT_DEFINE_WITH_SCALAR, Tensor)
DTENSOR_ELEMENTWISE_UNARY(DT_DEFINE_UNARY, Tensor)
#undef DT_DEFINE_UNARY
#undef DT_DEFINE_WITH_SCALAR
#undef DT_DEFINE_BINARY

// Integer division checks its divisors for zeros: first on the CPU; on the
// device after the launch (whose result is then dropped), so that the op's
// own checks come first and the comparison runs on valid operands.
absl::StatusOr<Tensor> Div(const Tensor& a, const Tensor& b) {
  if (cuda::OnCuda(a) || cuda::OnCuda(b)) {
    DT_ASSIGN_OR_RETURN(
        Tensor out, cuda::BinaryOnDevice(cuda::BinaryOp::kDiv, "Div", a, b));
    DT_RETURN_IF_ERROR(CheckDivisor(b, out.numel()));
    return out;
  }
  DT_ASSIGN_OR_RETURN(Shape shape, CheckBinary("Div", a, b, DivOp::kDomain));
  DT_RETURN_IF_ERROR(CheckDivisor(b, NumElements(shape)));
  return RunBinary(a, b, shape, DivOp());
}

absl::StatusOr<Tensor> SiluBackward(const Tensor& grad, const Tensor& x) {
  return Binary("SiluBackward", grad, x, SiluBackwardOp());
}

absl::StatusOr<Tensor> Gelu(const Tensor& a, GeluApproximation approximation) {
  if (approximation == GeluApproximation::kTanh) {
    return Unary("Gelu", a, GeluTanhOp());
  }
  return Unary("Gelu", a, GeluErfOp());
}

absl::StatusOr<Tensor> Where(const Tensor& cond, const Tensor& a,
                             const Tensor& b) {
  const bool on_device =
      cuda::OnCuda(cond) || cuda::OnCuda(a) || cuda::OnCuda(b);
  if (!on_device) {
    DT_RETURN_IF_ERROR(CheckCpu(cond, "Where", "cond"));
    DT_RETURN_IF_ERROR(CheckCpu(a, "Where", "a"));
    DT_RETURN_IF_ERROR(CheckCpu(b, "Where", "b"));
  }
  if (cond.dtype() != DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Where: cond has dtype ", std::string(DTypeName(cond.dtype())),
        "; bool is required"));
  }
  DT_RETURN_IF_ERROR(CheckSameDType(a, b, "Where", "a", "b"));
  absl::StatusOr<Shape> cond_a = BroadcastShapes(cond.shape(), a.shape());
  absl::StatusOr<Shape> shape =
      cond_a.ok() ? BroadcastShapes(*cond_a, b.shape()) : cond_a;
  if (!shape.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Where: shapes ", ShapeToString(cond.shape()), " (cond), ",
                     ShapeToString(a.shape()), " (a) and ",
                     ShapeToString(b.shape()), " (b) do not broadcast"));
  }
  if (on_device) return cuda::WhereOnDevice(cond, a, b, *shape);
  DT_ASSIGN_OR_RETURN(const Tensor cond_view, cond.Expand(*shape));
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(*shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(*shape));
  return DispatchDType(a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
    using T = decltype(tag);
    DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(*shape, a.dtype()));
    WhereKernel<T>(cond_view, a_view, b_view, out);
    return out;
  });
}

}  // namespace dtensor
