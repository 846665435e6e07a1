#ifndef DTENSOR_TENSOR_CUDA_HOST_DEVICE_H_
#define DTENSOR_TENSOR_CUDA_HOST_DEVICE_H_

// What the kernel bodies shared by the CUDA launches (nvcc) and their host
// forms (any C++17 compiler) need: the DT_HOST_DEVICE marker, the 16-bit
// float storage types and their conversions (which dtensor/tensor/half.h's
// BFloat16 and Half convert with). Includes nothing of the project, so that
// nvcc can compile it alone.

#include <stdint.h>
#include <string.h>

#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

namespace dtensor::cuda {

// The element types a kernel is launched for (dtensor/tensor/dtype.h's DType,
// which the device code cannot include), each with its storage type, as
// X(enumerator, type): the one table that ScalarType and Dispatch
// (launch_common.cuh) are written from.
#define DT_CUDA_FOR_EACH_SCALAR_TYPE(X) \
  X(kF32, float)                        \
  X(kF64, double)                       \
  X(kBF16, Bf16)                        \
  X(kF16, F16)                          \
  X(kI32, int32_t)                      \
  X(kI64, int64_t)                      \
  X(kBool, bool)

#define DT_CUDA_SCALAR_TYPE_ENUMERATOR(enumerator, storage) enumerator,
enum class ScalarType {
  DT_CUDA_FOR_EACH_SCALAR_TYPE(DT_CUDA_SCALAR_TYPE_ENUMERATOR)
};
#undef DT_CUDA_SCALAR_TYPE_ENUMERATOR

// bfloat16 and IEEE half as stored: the same layout as dtensor/tensor/half.h's
// BFloat16 and Half (one uint16_t), so their buffers can be reinterpreted.
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

DT_HOST_DEVICE inline uint32_t FloatBits(float value) {
  uint32_t word;
  memcpy(&word, &value, sizeof(word));
  return word;
}

DT_HOST_DEVICE inline float BitsFloat(uint32_t word) {
  float value;
  memcpy(&value, &word, sizeof(value));
  return value;
}

DT_HOST_DEVICE inline float ToFloat(Bf16 x) {
  return BitsFloat(static_cast<uint32_t>(x.bits) << 16);
}

// Round to nearest even; a NaN stays a (quiet) NaN.
DT_HOST_DEVICE inline Bf16 ToBf16(float value) {
  const uint32_t word = FloatBits(value);
  if (value != value) return Bf16{static_cast<uint16_t>((word >> 16) | 0x40)};
  const uint32_t rounding_bias = 0x7fff + ((word >> 16) & 1);
  return Bf16{static_cast<uint16_t>((word + rounding_bias) >> 16)};
}

DT_HOST_DEVICE inline float ToFloat(F16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1f;
  const uint32_t mantissa = h.bits & 0x3ff;
  if (exponent == 0) {
    // Exact: a power-of-two scale of an integer below 2^10.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  uint32_t word = sign;
  if (exponent == 0x1f) {
    word |= 0x7f800000 | (mantissa << 13);
  } else {
    word |= ((exponent + 112) << 23) | (mantissa << 13);
  }
  return BitsFloat(word);
}

DT_HOST_DEVICE inline F16 ToF16(float value) {
  const uint32_t word = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((word >> 16) & 0x8000);
  const uint32_t abs_word = word & 0x7fffffff;
  if (abs_word >= 0x7f800000) {  // Inf or NaN.
    return F16{static_cast<uint16_t>(sign | 0x7c00 |
                                     (abs_word > 0x7f800000 ? 0x200 : 0))};
  }
  if (abs_word >= 0x477ff000) return F16{static_cast<uint16_t>(sign | 0x7c00)};
  if (abs_word < 0x38800000) {
    // Subnormal half (or zero): the integer part of |value| * 2^24, rounded
    // half to even.
    const float scaled = fabsf(value) * 16777216.0f;
    return F16{static_cast<uint16_t>(
        sign | static_cast<uint16_t>(nearbyintf(scaled)))};
  }
  const uint32_t half_word = abs_word - 0x38000000;
  const uint32_t rounding_bias = 0xfff + ((half_word >> 13) & 1);
  return F16{static_cast<uint16_t>(
      sign | static_cast<uint16_t>((half_word + rounding_bias) >> 13))};
}

// The type a kernel computes in for storage type T (float for the 16-bit
// floats, T otherwise), and the conversions between the two.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Bf16> {
  using type = float;
};
template <>
struct ComputeOf<F16> {
  using type = float;
};
template <typename T>
using Compute = typename ComputeOf<T>::type;

template <typename T>
DT_HOST_DEVICE inline T Load(T x) {
  return x;
}
DT_HOST_DEVICE inline float Load(Bf16 x) { return ToFloat(x); }
DT_HOST_DEVICE inline float Load(F16 x) { return ToFloat(x); }

// Converts a computed value `v` (float, double, an integer or bool) to
// storage type T as dtensor/tensor/convert.h's ConvertValue does: the 16-bit
// floats round through float, bool is v != 0 (NaN is true), floats to integers
// truncate, NaN giving 0 and out-of-range values saturating.
template <typename T, typename V>
DT_HOST_DEVICE inline T Store(V v) {
  if constexpr (std::is_same_v<T, Bf16>) {
    return ToBf16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, F16>) {
    return ToF16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != V(0);
  } else if constexpr (std::is_integral_v<T> && !std::is_integral_v<V>) {
    constexpr double kLimit =
        static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    const double x = static_cast<double>(v);
    if (x != x) return 0;
    if (x >= kLimit) return std::numeric_limits<T>::max();
    if (x <= -kLimit) return std::numeric_limits<T>::min();
    return static_cast<T>(x);
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_HOST_DEVICE_H_
