#ifndef DTENSOR_TENSOR_HALF_H_
#define DTENSOR_TENSOR_HALF_H_

#include <cstdint>

#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor {

// 16-bit floating storage types. They convert implicitly to float and
// explicitly from float, rounding to nearest even; arithmetic happens in float.
// The conversions are the device kernels' (cuda/host_device.h), so that the
// CPU and the device round alike.

// bfloat16: the top 16 bits of an IEEE float32.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(cuda::ToBf16(value).bits) {}
  operator float() const { return cuda::ToFloat(cuda::Bf16{bits}); }
};

// IEEE 754 binary16: 1 sign bit, 5 exponent bits, 10 mantissa bits.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float value) : bits(cuda::ToF16(value).bits) {}
  operator float() const { return cuda::ToFloat(cuda::F16{bits}); }
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_HALF_H_
