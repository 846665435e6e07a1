#include "tensor/adamw_kernel.h"

#include <cmath>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/blocked_loop.h"
#include "tensor/convert.h"
#include "tensor/dispatch.h"
#include "tensor/kernel_checks.h"
#include "tensor/strided_loop.h"

namespace dtensor {
namespace {

constexpr char kOp[] = "AdamWStep";

// The per-step constants in compute type C.
template <typename C>
struct Coefficients {
  C beta1, one_minus_beta1, beta2, one_minus_beta2, decay, step_size,
      inverse_bias_correction2_sqrt, eps;
};

template <typename C>
Coefficients<C> CoefficientsOf(const AdamWStepArgs& a) {
  const double t = static_cast<double>(a.step);
  const double bias_correction1 = 1 - std::pow(a.beta1, t);
  const double bias_correction2 = 1 - std::pow(a.beta2, t);
  return {static_cast<C>(a.beta1),
          static_cast<C>(1 - a.beta1),
          static_cast<C>(a.beta2),
          static_cast<C>(1 - a.beta2),
          static_cast<C>(1 - a.learning_rate * a.weight_decay),
          static_cast<C>(a.learning_rate / bias_correction1),
          static_cast<C>(1 / std::sqrt(bias_correction2)),
          static_cast<C>(a.eps)};
}

// One element's step: p, m and v updated from g.
template <typename T>
inline void AdamWElement(T& p, T& m, T& v, T g,
                         const Coefficients<ComputeType<T>>& k) {
  using C = ComputeType<T>;
  const C grad = static_cast<C>(g);
  const C m_next = k.beta1 * static_cast<C>(m) + k.one_minus_beta1 * grad;
  const C v_next =
      k.beta2 * static_cast<C>(v) + k.one_minus_beta2 * grad * grad;
  const C denom = std::sqrt(v_next) * k.inverse_bias_correction2_sqrt + k.eps;
  const C p_next = static_cast<C>(p) * k.decay - k.step_size * m_next / denom;
  m = ConvertValue<T>(m_next);
  v = ConvertValue<T>(v_next);
  p = ConvertValue<T>(p_next);
}

// The step over `count` contiguous elements of each operand; __restrict and
// blocks let the compiler vectorize it (tensor/blocked_loop.h).
template <typename T>
ABSL_ATTRIBUTE_NOINLINE void AdamWRun(T* __restrict p, T* __restrict m,
                                      T* __restrict v, const T* __restrict g,
                                      int64_t count,
                                      const Coefficients<ComputeType<T>>& k) {
  ForEachIndexInBlocks(
      count, [&](int64_t i) { AdamWElement(p[i], m[i], v[i], g[i], k); });
}

// The step over the operands as laid out (a shard may be a strided view).
template <typename T>
void AdamWKernel(const Tensor& param, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& grad,
                 const Coefficients<ComputeType<T>>& k) {
  T* const p = param.data<T>();
  T* const m = exp_avg.data<T>();
  T* const v = exp_avg_sq.data<T>();
  const T* const g = grad.data<T>();
  ForEachStridedRun<4>(
      param.shape(),
      {param.strides(), exp_avg.strides(), exp_avg_sq.strides(),
       grad.strides()},
      {0, 0, 0, 0},
      [&](const OperandOffsets<4>& at, const OperandOffsets<4>& steps,
          int64_t count) {
        if (steps == OperandOffsets<4>{1, 1, 1, 1}) {
          AdamWRun(p + at[0], m + at[1], v + at[2], g + at[3], count, k);
          return;
        }
        for (int64_t i = 0; i < count; ++i) {
          AdamWElement(p[at[0] + i * steps[0]], m[at[1] + i * steps[1]],
                       v[at[2] + i * steps[2]], g[at[3] + i * steps[3]], k);
        }
      });
}

absl::Status CheckOperand(const Tensor& t, const Tensor& param,
                          const char* name) {
  DT_RETURN_IF_ERROR(internal::CheckFloatingCpu(t, kOp, name));
  DT_RETURN_IF_ERROR(internal::CheckSameDType(param, t, kOp, "param", name));
  if (t.shape() != param.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", name, " has shape ", ShapeToString(t.shape()),
                     ", param ", ShapeToString(param.shape())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AdamWStep(const Tensor& param, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const Tensor& grad,
                       const AdamWStepArgs& args) {
  DT_RETURN_IF_ERROR(CheckOperand(param, param, "param"));
  DT_RETURN_IF_ERROR(CheckOperand(exp_avg, param, "exp_avg"));
  DT_RETURN_IF_ERROR(CheckOperand(exp_avg_sq, param, "exp_avg_sq"));
  DT_RETURN_IF_ERROR(CheckOperand(grad, param, "grad"));
  if (param.raw_data() == exp_avg.raw_data() ||
      param.raw_data() == exp_avg_sq.raw_data() ||
      exp_avg.raw_data() == exp_avg_sq.raw_data()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": param, exp_avg and exp_avg_sq must be distinct buffers"));
  }
  if (args.step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": step ", args.step, " must be >= 1"));
  }
  internal::DispatchFloatingDType(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AdamWKernel<T>(param, exp_avg, exp_avg_sq, grad,
                   CoefficientsOf<ComputeType<T>>(args));
  });
  return absl::OkStatus();
}

}  // namespace dtensor
