#ifndef DTENSOR_TENSOR_CUDA_ADAMW_BODY_H_
#define DTENSOR_TENSOR_CUDA_ADAMW_BODY_H_

// The per-element body of the fused AdamW step (dtensor/tensor/adamw_kernel.h),
// shared by the CPU kernel, the CUDA launch and the host-form tests.

#include <stdint.h>

#include <cmath>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// The per-step constants in compute type C.
template <typename C>
struct AdamWCoefficients {
  C beta1, one_minus_beta1, beta2, one_minus_beta2, decay, step_size,
      inverse_bias_correction2_sqrt, eps;
};

// The constants of step `step` >= 1, each computed in double (on the host).
inline AdamWCoefficients<double> AdamWCoefficientsOf(double learning_rate,
                                                     double beta1, double beta2,
                                                     double eps,
                                                     double weight_decay,
                                                     int64_t step) {
  const double t = static_cast<double>(step);
  return {beta1,
          1 - beta1,
          beta2,
          1 - beta2,
          1 - learning_rate * weight_decay,
          learning_rate / (1 - std::pow(beta1, t)),
          1 / std::sqrt(1 - std::pow(beta2, t)),
          eps};
}

// `k` rounded to compute type C.
template <typename C>
AdamWCoefficients<C> CoefficientsIn(const AdamWCoefficients<double>& k) {
  return {static_cast<C>(k.beta1),
          static_cast<C>(k.one_minus_beta1),
          static_cast<C>(k.beta2),
          static_cast<C>(k.one_minus_beta2),
          static_cast<C>(k.decay),
          static_cast<C>(k.step_size),
          static_cast<C>(k.inverse_bias_correction2_sqrt),
          static_cast<C>(k.eps)};
}

// One element's step in the compute type of T, p, m and v updated in place
// from g (torch.optim.AdamW's formula):
//   m = beta1 m + (1 - beta1) g
//   v = beta2 v + (1 - beta2) g^2
//   p = p decay - step_size m / (sqrt(v) inverse_bias_correction2_sqrt + eps)
template <typename T>
DT_HOST_DEVICE inline void AdamWElement(
    T* p, T* m, T* v, const T* g, const AdamWCoefficients<Compute<T>>& k) {
  using C = Compute<T>;
  const C grad = Load(*g);
  const C m_next = k.beta1 * Load(*m) + k.one_minus_beta1 * grad;
  const C v_next = k.beta2 * Load(*v) + k.one_minus_beta2 * grad * grad;
  const C denom = Sqrt(v_next) * k.inverse_bias_correction2_sqrt + k.eps;
  const C p_next = Load(*p) * k.decay - k.step_size * m_next / denom;
  *m = Store<T>(m_next);
  *v = Store<T>(v_next);
  *p = Store<T>(p_next);
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ADAMW_BODY_H_
