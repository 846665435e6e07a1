#ifndef DTENSOR_TENSOR_CUDA_FAST_LOG_H_
#define DTENSOR_TENSOR_CUDA_FAST_LOG_H_

// log in straight-line arithmetic (no call, no branch), so that a loop of it
// vectorizes: the Log op's CPU kernel and the CUDA kernel body (the same
// arithmetic on both; nvcc may fuse multiply-adds, so a device result may
// differ from the host's in the last bit), the counterpart of fast_exp.h.
// Includes nothing of the project but host_device.h.

#include <stdint.h>

#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// log(x) for float: within 1 ulp of the correctly rounded log over the
// positive floats, subnormals included (tests/tensor/fast_log_test.cc checks
// every 61st bit pattern and every float in [0.5, 2]).
// log(+-0) = -inf, log(+inf) = +inf, log of a negative number or nan is nan,
// log(1) = 0 exactly.
//
// How (Cephes' logf): a subnormal x is scaled by 2^23 first; x = m 2^e with
// m in [sqrt(1/2), sqrt(2)); log(m) = f - f^2 / 2 + f^3 P(f) with f = m - 1
// (exact) and P of degree 8 (Cephes); e ln2 added in two parts so that e *
// kLn2Hi is exact. The special cases are blended in as bits at the end, as
// fast_exp.h clamps, so that GCC keeps the loop branch-free.
DT_HOST_DEVICE inline float FastLog(float x) {
  constexpr float kTwo23 = 8388608.0f;
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr float kSqrt2 = 1.41421356237f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr uint32_t kMinusInf = 0xff800000u;
  constexpr uint32_t kPlusInf = 0x7f800000u;
  constexpr uint32_t kNan = 0x7fc00000u;
  // All ones where x is below the normal range (subnormals, and the zeros,
  // negatives and nan that the blends below replace).
  const uint32_t small = 0u - static_cast<uint32_t>(!(x >= kMinNormal));
  const uint32_t bits =
      (FloatBits(x * kTwo23) & small) | (FloatBits(x) & ~small);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 -
              static_cast<int32_t>(small & 23u);
  float m = BitsFloat((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2).
  const uint32_t above = 0u - static_cast<uint32_t>(m > kSqrt2);
  m = BitsFloat((FloatBits(m * 0.5f) & above) | (FloatBits(m) & ~above));
  e += static_cast<int32_t>(above & 1u);
  const float f = m - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const float fe = static_cast<float>(e);
  float y = f * z * p;
  y += kLn2Lo * fe;
  y -= 0.5f * z;
  const float result = (f + y) + kLn2Hi * fe;
  const uint32_t zero = 0u - static_cast<uint32_t>(x == 0.0f);
  const uint32_t infinite =
      0u - static_cast<uint32_t>(FloatBits(x) == kPlusInf);
  const uint32_t invalid = 0u - static_cast<uint32_t>(!(x >= 0.0f));
  uint32_t out = FloatBits(result);
  out = (out & ~zero) | (kMinusInf & zero);
  out = (out & ~infinite) | (kPlusInf & infinite);
  out = (out & ~invalid) | (kNan & invalid);
  return BitsFloat(out);
}

// FastLog for float; the library's log for double (no faster form).
DT_HOST_DEVICE inline float FastLogOf(float x) { return FastLog(x); }
DT_HOST_DEVICE inline double FastLogOf(double x) { return log(x); }

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_FAST_LOG_H_
