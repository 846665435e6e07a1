#ifndef DTENSOR_TENSOR_CUDA_FAST_EXP_H_
#define DTENSOR_TENSOR_CUDA_FAST_EXP_H_

// exp in straight-line arithmetic (no call, no branch), so that a loop of it
// vectorizes: the exp of softmax, SiLU, sigmoid and cross entropy, in the CPU
// kernels and in the kernel bodies shared with the CUDA launches (the same
// arithmetic on both; nvcc may fuse multiply-adds, so a device result may
// differ from the host's in the last bit). Includes nothing of the project
// but host_device.h.

#include <stdint.h>

#include <cmath>

#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// exp(x) for float: within 2 ulp of the correctly rounded exp over the whole
// float range (tests/tensor/fast_exp_test.cc measures 1 ulp), counting ulps
// as steps between adjacent floats, so a subnormal result, FLT_MAX next to
// +inf and the smallest subnormal next to 0 are covered too. exp(nan) is
// nan, exp(+inf) = +inf, exp(-inf) = +0, exp(+-0) = 1 exactly.
//
// How (Cephes' expf): x = n ln2 + r with n = round(x / ln2) and |r| <=
// ln2 / 2, ln2 split in two so that n * kLn2Hi is exact; exp(r) by a degree-7
// polynomial (minimax, Cephes); 2^n applied as two normal powers of two
// 2^(n/2) 2^(n - n/2), so that a subnormal result is rounded once. x is
// clamped to [-104, 89] first (exp is 0 or inf there already); n comes out
// of the float rounding of x / ln2 + 1.5 * 2^23 without a float-to-int
// conversion (which is undefined for nan).
DT_HOST_DEVICE inline float FastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: ulp 1.
  // The clamp as a bit blend, not two selects: GCC (-O2) threads the second
  // comparison through the first select's constant, splitting the body into
  // branches, and the loops around FastExp stayed scalar (slower than libm's
  // expf). Comparisons with nan are false: nan stays.
  const uint32_t above = 0u - static_cast<uint32_t>(x > 89.0f);
  const uint32_t below = 0u - static_cast<uint32_t>(x < -104.0f);
  x = BitsFloat((FloatBits(x) & ~(above | below)) | (FloatBits(89.0f) & above) |
                (FloatBits(-104.0f) & below));
  const float shifted = x * kLog2e + kRound;
  const float n = shifted - kRound;
  // n as an integer: the low mantissa bits of `shifted`.
  const int32_t ni =
      static_cast<int32_t>(FloatBits(shifted) - FloatBits(kRound));
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const int32_t half = ni / 2;
  const float scale1 = BitsFloat(static_cast<uint32_t>(half + 127) << 23);
  const float scale2 = BitsFloat(static_cast<uint32_t>(ni - half + 127) << 23);
  return p * scale1 * scale2;
}

// FastExp for float; the library's exp for double (no faster form).
DT_HOST_DEVICE inline float FastExpOf(float x) { return FastExp(x); }
DT_HOST_DEVICE inline double FastExpOf(double x) { return exp(x); }

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_FAST_EXP_H_
