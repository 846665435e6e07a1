// cuda::FastExp (dtensor/tensor/cuda/fast_exp.h), the exp of the CPU kernels
// and the CUDA kernel bodies, against exp in double rounded to float (the
// correctly rounded result but for rare double roundings): within its stated 2
// ulp over the whole float range (every 257th bit pattern, both signs), densely
// around the overflow and subnormal thresholds, and exactly on the special
// values (nan, infinities, zeros, subnormal and extreme inputs). The
// vectorized loops (dtensor/tensor/vector_exp.h) and the Exp, Sigmoid and Silu
// ops give FastExp's bits.
#include "dtensor/tensor/cuda/fast_exp.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/tensor/vector_exp.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using cuda::FastExp;
using testing::UlpDistance;

// The stated tolerance, in steps between adjacent floats.
constexpr int64_t kMaxUlps = 2;

uint32_t Bits(float x) { return cuda::FloatBits(x); }

float Reference(float x) { return static_cast<float>(std::exp(double{x})); }

// The largest distance from the reference over `inputs` (none nan); fails
// at the first input beyond the tolerance.
int64_t MaxUlps(const std::vector<float>& inputs) {
  int64_t worst = 0;
  for (float x : inputs) {
    const int64_t ulps = UlpDistance(FastExp(x), Reference(x));
    if (ulps > kMaxUlps) {
      ADD_FAILURE() << "exp(" << x << " = bits " << Bits(x)
                    << "): " << FastExp(x) << ", want " << Reference(x) << " ("
                    << ulps << " ulp)";
      return ulps;
    }
    worst = std::max(worst, ulps);
  }
  return worst;
}

// Every 257th bit pattern of the non-nan floats of both signs.
std::vector<float> SweptFloats() {
  std::vector<float> inputs;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 257) {
    const float x = cuda::BitsFloat(static_cast<uint32_t>(bits));
    if (!std::isnan(x)) inputs.push_back(x);
  }
  return inputs;
}

TEST(FastExpTest, WithinTwoUlpOverTheWholeRange) {
  const std::vector<float> inputs = SweptFloats();
  ASSERT_GT(inputs.size(), 16000000u);
  const int64_t worst = MaxUlps(inputs);
  std::printf("max error over %zu inputs: %lld ulp\n", inputs.size(),
              static_cast<long long>(worst));
}

// 20000 consecutive floats around each threshold: the overflow to +inf
// (log FLT_MAX), the first subnormal result (log FLT_MIN), the smallest
// subnormal (log of it), and the rounding to 0 (log of half of it).
TEST(FastExpTest, WithinTwoUlpAroundTheThresholds) {
  for (float threshold : {88.7228394f, -87.3365479f, -103.278931f, -103.972076f,
                          0.0f, 1.0f, -1.0f}) {
    std::vector<float> inputs;
    float x = threshold;
    for (int i = 0; i < 10000; ++i) x = std::nextafter(x, -1000.0f);
    for (int i = 0; i < 20000; ++i) {
      inputs.push_back(x);
      x = std::nextafter(x, 1000.0f);
    }
    SCOPED_TRACE(threshold);
    MaxUlps(inputs);
  }
}

TEST(FastExpTest, SpecialValuesAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  const float max = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(std::isnan(FastExp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(FastExp(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(FastExp(std::numeric_limits<float>::signaling_NaN())));
  EXPECT_EQ(FastExp(inf), inf);
  EXPECT_EQ(Bits(FastExp(-inf)), 0u);  // +0.
  EXPECT_EQ(FastExp(max), inf);
  EXPECT_EQ(Bits(FastExp(-max)), 0u);
  EXPECT_EQ(FastExp(100.0f), inf);
  EXPECT_EQ(Bits(FastExp(-200.0f)), 0u);
  for (float one : {0.0f, -0.0f, tiny, -tiny, 1e-40f, -1e-40f,
                    std::numeric_limits<float>::min()}) {
    EXPECT_EQ(FastExp(one), 1.0f) << one;
  }
  // exp of a small integer, where the reference is well away from a tie.
  EXPECT_LE(UlpDistance(FastExp(1.0f), 2.71828183f), 1);
}

// The vectorized loops and the ops give FastExp's bits element by element.
TEST(FastExpTest, VectorizedLoopsAndOpsGiveTheSameBits) {
  std::vector<float> inputs;
  for (int i = 0; i < 4099; ++i) inputs.push_back(-110.0f + 0.0491f * i);
  inputs.push_back(std::numeric_limits<float>::quiet_NaN());
  inputs.push_back(std::numeric_limits<float>::infinity());
  inputs.push_back(-std::numeric_limits<float>::infinity());
  const int64_t n = static_cast<int64_t>(inputs.size());
  std::vector<float> shifted(n);
  ExpShifted(inputs.data(), shifted.data(), n, 0.5f);
  std::vector<float> in_place = inputs;
  ExpShiftedInPlace(in_place.data(), n, 0.5f);
  Tensor x = *Tensor::FromVector(inputs, {n});
  const std::vector<float> exp = Exp(x)->ToVector<float>().value();
  const std::vector<float> sigmoid = Sigmoid(x)->ToVector<float>().value();
  const std::vector<float> silu = Silu(x)->ToVector<float>().value();
  for (int64_t i = 0; i < n; ++i) {
    const float v = inputs[i];
    SCOPED_TRACE(v);
    EXPECT_EQ(Bits(shifted[i]), Bits(FastExp(v - 0.5f)));
    EXPECT_EQ(Bits(in_place[i]), Bits(FastExp(v - 0.5f)));
    EXPECT_EQ(Bits(exp[i]), Bits(FastExp(v)));
    EXPECT_EQ(Bits(sigmoid[i]), Bits(1.0f / (1.0f + FastExp(-v))));
    EXPECT_EQ(Bits(silu[i]), Bits(v / (1.0f + FastExp(-v))));
  }
}

}  // namespace
}  // namespace dtensor
