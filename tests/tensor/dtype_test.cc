// DTypes, the 16-bit float formats and element conversion, against bit
// patterns worked out by hand and brute-force nearest-value searches.
#include "dtensor/tensor/dtype.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using ::testing::HasSubstr;

float FloatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t BitsOfFloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

TEST(DTypeTest, ElementSizes) {
  EXPECT_EQ(ElementSize(DType::kF32), 4u);
  EXPECT_EQ(ElementSize(DType::kF64), 8u);
  EXPECT_EQ(ElementSize(DType::kBF16), 2u);
  EXPECT_EQ(ElementSize(DType::kF16), 2u);
  EXPECT_EQ(ElementSize(DType::kI32), 4u);
  EXPECT_EQ(ElementSize(DType::kI64), 8u);
  EXPECT_EQ(ElementSize(DType::kBool), 1u);
}

TEST(DTypeTest, NamesRoundTrip) {
  const std::pair<DType, std::string> expected[] = {
      {DType::kF32, "f32"},  {DType::kF64, "f64"}, {DType::kBF16, "bf16"},
      {DType::kF16, "f16"},  {DType::kI32, "i32"}, {DType::kI64, "i64"},
      {DType::kBool, "bool"}};
  for (const auto& [dtype, name] : expected) {
    EXPECT_EQ(DTypeName(dtype), name);
    auto parsed = ParseDType(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
    std::ostringstream os;
    os << dtype;
    EXPECT_EQ(os.str(), name);
  }
}

TEST(DTypeTest, ParseRejectsUnknownNames) {
  for (const char* name : {"float32", "F32", "", "i8"}) {
    auto parsed = ParseDType(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(),
                HasSubstr("\"" + std::string(name) + "\""));
  }
}

TEST(DTypeTest, FloatingPointDTypes) {
  EXPECT_TRUE(IsFloatingPoint(DType::kF32));
  EXPECT_TRUE(IsFloatingPoint(DType::kF64));
  EXPECT_TRUE(IsFloatingPoint(DType::kBF16));
  EXPECT_TRUE(IsFloatingPoint(DType::kF16));
  EXPECT_FALSE(IsFloatingPoint(DType::kI32));
  EXPECT_FALSE(IsFloatingPoint(DType::kI64));
  EXPECT_FALSE(IsFloatingPoint(DType::kBool));
}

// ---- bfloat16. ----

TEST(BFloat16Test, RoundsToNearestEvenOnHandPickedPatterns) {
  struct Case {
    uint32_t float_bits;
    uint16_t expected;
  };
  const Case cases[] = {
      {0x3F800000, 0x3F80},  // 1.0 exactly.
      {0xC0000000, 0xC000},  // -2.0 exactly.
      {0x3F807FFF, 0x3F80},  // Just below halfway: down.
      {0x3F808000, 0x3F80},  // Halfway, 0x3F80 is even: down.
      {0x3F808001, 0x3F81},  // Just above halfway: up.
      {0x3F818000, 0x3F82},  // Halfway, 0x3F81 is odd: up to even.
      {0x40490FDB, 0x4049},  // pi.
      {0x7F7FFFFF, 0x7F80},  // FLT_MAX rounds to infinity.
      {0x7F800000, 0x7F80},  // Infinity.
      {0x00000001, 0x0000},  // Smallest subnormal float rounds to zero.
      {0x80000000, 0x8000},  // -0.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(BFloat16(FloatFromBits(c.float_bits)).bits, c.expected)
        << std::hex << c.float_bits;
  }
}

TEST(BFloat16Test, NaNStaysNaN) {
  const BFloat16 nan(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan.bits & 0x7F80, 0x7F80);
  EXPECT_NE(nan.bits & 0x007F, 0);
  EXPECT_TRUE(std::isnan(static_cast<float>(nan)));
  // A signalling NaN whose payload sits in the dropped bits stays a NaN.
  EXPECT_TRUE(
      std::isnan(static_cast<float>(BFloat16(FloatFromBits(0x7F800001)))));
}

TEST(BFloat16Test, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    BFloat16 value;
    value.bits = static_cast<uint16_t>(bits);
    const float widened = value;
    // Widening is placing the bits on top of a float.
    EXPECT_EQ(BitsOfFloat(widened), bits << 16);
    if (std::isnan(widened)) continue;
    EXPECT_EQ(BFloat16(widened).bits, bits);
  }
}

// Decodes IEEE binary16 by its definition, in double.
double DecodeHalf(uint16_t bits) {
  const int sign = (bits & 0x8000) ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  if (exponent == 0x1F) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// The nearest of the candidate 16-bit patterns (ties to the even pattern):
// a brute-force search over every finite positive value of the format.
template <typename Decode>
uint16_t NearestPattern(double x, uint16_t max_finite, Decode decode) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  uint16_t best = 0;
  for (uint32_t bits = 1; bits <= max_finite; ++bits) {
    const double error = std::fabs(decode(bits) - magnitude);
    const double best_error = std::fabs(decode(best) - magnitude);
    if (error < best_error || (error == best_error && (bits & 1) == 0)) {
      best = static_cast<uint16_t>(bits);
    }
  }
  return sign | best;
}

TEST(HalfTest, RoundsToNearestEvenOnHandPickedValues) {
  struct Case {
    float value;
    uint16_t expected;
  };
  const Case cases[] = {
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.1f, 0x2E66},
      {65504.0f, 0x7BFF},               // Largest finite half.
      {65519.0f, 0x7BFF},               // Below the halfway point to 65536.
      {65520.0f, 0x7C00},               // Halfway to 65536: even is infinity.
      {std::ldexp(1.0f, -14), 0x0400},  // Smallest normal.
      {std::ldexp(1.0f, -24), 0x0001},  // Smallest subnormal.
      {std::ldexp(1.0f, -25), 0x0000},  // Halfway to the subnormal: even 0.
      {std::ldexp(3.0f, -25), 0x0002},  // 1.5 subnormal steps: even 2.
      {1.0f + std::ldexp(1.0f, -11), 0x3C00},  // Halfway, 0x3C00 is even.
      {1.0f + std::ldexp(3.0f, -11), 0x3C02},  // Halfway, 0x3C01 is odd.
      {-0.0f, 0x8000},
      {std::numeric_limits<float>::infinity(), 0x7C00},
      {-std::numeric_limits<float>::infinity(), 0xFC00},
      {1e10f, 0x7C00},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Half(c.value).bits, c.expected) << c.value;
  }
  const Half nan(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan.bits & 0x7C00, 0x7C00);
  EXPECT_NE(nan.bits & 0x03FF, 0);
}

TEST(HalfTest, EveryPatternDecodesAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    Half value;
    value.bits = static_cast<uint16_t>(bits);
    const double expected = DecodeHalf(value.bits);
    const float widened = value;
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(widened)) << bits;
      continue;
    }
    EXPECT_EQ(static_cast<double>(widened), expected) << bits;
    EXPECT_EQ(Half(widened).bits, bits);
  }
}

TEST(HalfTest, RandomFloatsRoundToTheNearestHalf) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> log_magnitude(-26.0, 16.5);
  for (int i = 0; i < 300; ++i) {
    const float value = static_cast<float>((rng() & 1 ? 1 : -1) *
                                           std::exp2(log_magnitude(rng)));
    uint16_t expected;
    if (std::fabs(value) >= 65520.0f) {
      expected = (value < 0 ? 0x8000 : 0) | 0x7C00;
    } else {
      expected = NearestPattern(value, 0x7BFF, DecodeHalf);
    }
    EXPECT_EQ(Half(value).bits, expected) << value;
  }
  // Exact ties between neighbours, where round-to-even decides.
  for (uint16_t low = 0x0001; low < 0x7BFF; low = low * 3 + 1) {
    const float tie =
        static_cast<float>((DecodeHalf(low) + DecodeHalf(low + 1)) / 2);
    EXPECT_EQ(Half(tie).bits, (low & 1) ? low + 1 : low) << tie;
  }
}

TEST(BFloat16Test, RandomFloatsRoundToTheNearestBFloat16) {
  auto decode = [](uint32_t bits) {
    return static_cast<double>(FloatFromBits(bits << 16));
  };
  std::mt19937 rng(11);
  for (int i = 0; i < 60; ++i) {
    // Random finite floats below the largest finite bfloat16.
    float value;
    do {
      value = FloatFromBits(static_cast<uint32_t>(rng()));
    } while (!std::isfinite(value) || std::fabs(value) >= 3.3e38f);
    EXPECT_EQ(BFloat16(value).bits, NearestPattern(value, 0x7F7F, decode))
        << value;
  }
}

// ---- ConvertValue. ----

TEST(ConvertValueTest, FloatToIntegerTruncatesAndSaturates) {
  EXPECT_EQ((ConvertValue<int32_t>(2.9)), 2);
  EXPECT_EQ((ConvertValue<int32_t>(-2.9)), -2);
  EXPECT_EQ((ConvertValue<int64_t>(-0.5f)), 0);
  EXPECT_EQ((ConvertValue<int32_t>(std::nan(""))), 0);
  EXPECT_EQ((ConvertValue<int64_t>(std::nanf(""))), 0);
  EXPECT_EQ((ConvertValue<int32_t>(3e9)), std::numeric_limits<int32_t>::max());
  EXPECT_EQ((ConvertValue<int32_t>(-3e9)), std::numeric_limits<int32_t>::min());
  EXPECT_EQ((ConvertValue<int32_t>(2147483647.0)), 2147483647);
  EXPECT_EQ((ConvertValue<int32_t>(-2147483648.0)), -2147483647 - 1);
  EXPECT_EQ((ConvertValue<int64_t>(1e19)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ((ConvertValue<int64_t>(-std::numeric_limits<double>::infinity())),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ((ConvertValue<int64_t>(std::ldexp(1.0, 62))), int64_t{1} << 62);
  EXPECT_EQ((ConvertValue<int32_t>(Half(-7.5f))), -7);
  EXPECT_EQ((ConvertValue<int64_t>(BFloat16(300.0f))), 300);
}

TEST(ConvertValueTest, BoolConversions) {
  EXPECT_TRUE((ConvertValue<bool>(0.25)));
  EXPECT_TRUE((ConvertValue<bool>(std::nan(""))));
  EXPECT_FALSE((ConvertValue<bool>(-0.0f)));
  EXPECT_TRUE((ConvertValue<bool>(int64_t{-3})));
  EXPECT_FALSE((ConvertValue<bool>(Half(0.0f))));
  EXPECT_TRUE((ConvertValue<bool>(BFloat16(1e-30f))));
  EXPECT_EQ((ConvertValue<int32_t>(true)), 1);
  EXPECT_EQ((ConvertValue<double>(false)), 0.0);
  EXPECT_EQ((ConvertValue<Half>(true)).bits, 0x3C00);
}

TEST(ConvertValueTest, SixteenBitFloatsGoThroughFloat) {
  EXPECT_EQ((ConvertValue<Half>(0.1)).bits, 0x2E66);
  EXPECT_EQ((ConvertValue<BFloat16>(int64_t{257})).bits, 0x4380);  // 256.
  EXPECT_EQ((ConvertValue<BFloat16>(Half(1.0f))).bits, 0x3F80);
  EXPECT_EQ((ConvertValue<Half>(BFloat16(-2.0f))).bits, 0xC000);
  EXPECT_EQ((ConvertValue<double>(Half(65504.0f))), 65504.0);
  EXPECT_EQ((ConvertValue<int32_t>(int64_t{1} << 33 | 5)), 5);
}

}  // namespace
}  // namespace dtensor
