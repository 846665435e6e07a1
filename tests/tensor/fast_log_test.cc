// cuda::FastLog (dtensor/tensor/cuda/fast_log.h), the log of the Log op's CPU
// kernel and CUDA kernel body, against log in double rounded to float: within
// its stated 1 ulp over every 61st positive float (subnormals included), over
// every float in [0.5, 2] (where log is near 0 and relative error shows),
// exact on the special values, and the Log op gives FastLog's bits.
#include "dtensor/tensor/cuda/fast_log.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using cuda::FastLog;
using testing::UlpDistance;

// The stated tolerance, in steps between adjacent floats.
constexpr int64_t kMaxUlps = 1;

uint32_t Bits(float x) { return cuda::FloatBits(x); }

float Reference(float x) { return static_cast<float>(std::log(double{x})); }

// Checks FastLog over the floats with bit patterns [first, last] in steps
// of `step`; returns the largest distance seen.
int64_t MaxUlps(uint32_t first, uint32_t last, uint32_t step) {
  int64_t worst = 0;
  for (uint64_t bits = first; bits <= last; bits += step) {
    const float x = cuda::BitsFloat(static_cast<uint32_t>(bits));
    const int64_t ulps = UlpDistance(FastLog(x), Reference(x));
    if (ulps > kMaxUlps) {
      ADD_FAILURE() << "log(" << x << " = bits " << bits << "): " << FastLog(x)
                    << ", want " << Reference(x) << " (" << ulps << " ulp)";
      return ulps;
    }
    worst = std::max(worst, ulps);
  }
  return worst;
}

TEST(FastLogTest, WithinOneUlpOverThePositiveFloats) {
  // From the smallest subnormal to FLT_MAX.
  EXPECT_LE(MaxUlps(1, 0x7f7fffffu, 61), kMaxUlps);
}

TEST(FastLogTest, WithinOneUlpOnEveryFloatNearOne) {
  EXPECT_LE(MaxUlps(Bits(0.5f), Bits(2.0f), 1), kMaxUlps);
}

TEST(FastLogTest, SpecialValuesAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FastLog(0.0f), -inf);
  EXPECT_EQ(FastLog(-0.0f), -inf);
  EXPECT_EQ(FastLog(inf), inf);
  EXPECT_TRUE(std::isnan(FastLog(-inf)));
  EXPECT_TRUE(std::isnan(FastLog(-1.0f)));
  EXPECT_TRUE(std::isnan(FastLog(-std::numeric_limits<float>::denorm_min())));
  EXPECT_TRUE(std::isnan(FastLog(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(Bits(FastLog(1.0f)), 0u);  // +0.
  EXPECT_LE(UlpDistance(FastLog(std::numeric_limits<float>::max()),
                        Reference(std::numeric_limits<float>::max())),
            kMaxUlps);
}

// The Log op's CPU loop (vectorized) gives FastLog's bits element by element.
TEST(FastLogTest, LogOpGivesTheSameBits) {
  std::vector<float> inputs;
  for (int i = 0; i < 4099; ++i) inputs.push_back(1e-3f + 0.0731f * i);
  inputs.push_back(0.0f);
  inputs.push_back(-2.0f);
  inputs.push_back(std::numeric_limits<float>::infinity());
  inputs.push_back(std::numeric_limits<float>::denorm_min());
  const int64_t n = static_cast<int64_t>(inputs.size());
  const Tensor x = *Tensor::FromVector(inputs, {n});
  const std::vector<float> log = Log(x)->ToVector<float>().value();
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(inputs[i]);
    const float want = FastLog(inputs[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(log[i]));
    } else {
      EXPECT_EQ(Bits(log[i]), Bits(want));
    }
  }
}

}  // namespace
}  // namespace dtensor
