#ifndef DTENSOR_TENSOR_HALF_H_
#define DTENSOR_TENSOR_HALF_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dtensor {

// 16-bit floating storage types. They convert implicitly to float and
// explicitly from float, rounding to nearest even; arithmetic happens in float.

// bfloat16: the top 16 bits of an IEEE float32.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(Round(value)) {}
  operator float() const {
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof(value));
    return value;
  }

 private:
  static uint16_t Round(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof(word));
    if (std::isnan(value)) return static_cast<uint16_t>((word >> 16) | 0x40);
    uint32_t rounding_bias = 0x7fff + ((word >> 16) & 1);
    return static_cast<uint16_t>((word + rounding_bias) >> 16);
  }
};

// IEEE 754 binary16: 1 sign bit, 5 exponent bits, 10 mantissa bits.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float value) : bits(FromFloat(value)) {}
  operator float() const { return ToFloat(bits); }

 private:
  static uint16_t FromFloat(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof(word));
    const uint16_t sign = static_cast<uint16_t>((word >> 16) & 0x8000);
    const uint32_t abs_word = word & 0x7fffffff;
    if (abs_word >= 0x7f800000) {  // Inf or NaN.
      return sign | 0x7c00 | (abs_word > 0x7f800000 ? 0x200 : 0);
    }
    if (abs_word >= 0x477ff000) return sign | 0x7c00;  // Rounds to infinity.
    if (abs_word < 0x38800000) {
      // Subnormal half (or zero): scale so the integer part is the mantissa,
      // then round half to even.
      float scaled = std::fabs(value) * 16777216.0f;  // 2^24.
      return sign | static_cast<uint16_t>(std::nearbyint(scaled));
    }
    // Normal: rebias the exponent from 127 to 15 and round 13 dropped bits.
    uint32_t half_word = abs_word - 0x38000000;
    uint32_t rounding_bias = 0xfff + ((half_word >> 13) & 1);
    return sign | static_cast<uint16_t>((half_word + rounding_bias) >> 13);
  }

  static float ToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exponent = (h >> 10) & 0x1f;
    const uint32_t mantissa = h & 0x3ff;
    if (exponent == 0) {
      float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
      return sign ? -magnitude : magnitude;
    }
    uint32_t word = sign;
    if (exponent == 0x1f) {
      word |= 0x7f800000 | (mantissa << 13);
    } else {
      word |= ((exponent + 112) << 23) | (mantissa << 13);
    }
    float value;
    std::memcpy(&value, &word, sizeof(value));
    return value;
  }
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_HALF_H_
