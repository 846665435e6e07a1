// The Philox generator against the Random123 known-answer vectors, its
// stream layout, and the moments of its distributions.
#include "dtensor/tensor/generator.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "dtensor/tensor/philox.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// Known-answer vectors of Random123's kat_vectors for philox4x32 with 10
// rounds: counter, key, output.
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32x10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
                                     0x9b00dbd8}));
  EXPECT_EQ(Philox4x32x10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6,
                                     0x6d5451fd}));
  EXPECT_EQ(Philox4x32x10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420,
                                     0x24126ea1}));
}

TEST(GeneratorTest, FirstDrawsOfSeedZeroAreTheZeroBlock) {
  Generator generator(0);
  EXPECT_EQ(generator.NextU32(), 0x6627e8d5u);
  EXPECT_EQ(generator.NextU32(), 0xe169c58du);
  EXPECT_EQ(generator.NextU32(), 0xbc57ac4cu);
  EXPECT_EQ(generator.NextU32(), 0x9b00dbd8u);
  EXPECT_EQ(generator.offset(), 4u);
}

// Draw i is word i % 4 of the block at counter (i / 4) under key = seed.
TEST(GeneratorTest, DrawIIsWordIMod4OfBlockIDiv4) {
  const uint64_t seeds[] = {1, 0x123456789abcdef0ull, ~uint64_t{0}};
  const uint64_t offsets[] = {0, 3, 5, 1000003, (uint64_t{1} << 34) + 6};
  for (uint64_t seed : seeds) {
    for (uint64_t offset : offsets) {
      Generator generator(seed, offset);
      for (uint64_t i = offset; i < offset + 9; ++i) {
        const uint64_t block = i / 4;
        const auto words = Philox4x32x10(
            {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
             0, 0},
            {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
        EXPECT_EQ(generator.NextU32(), words[i % 4])
            << "seed " << seed << " draw " << i;
      }
    }
  }
}

TEST(GeneratorTest, AnyPositionCanBeReachedDirectly) {
  Generator sequential(42);
  std::vector<uint32_t> draws;
  for (int i = 0; i < 50; ++i) draws.push_back(sequential.NextU32());
  for (uint64_t start : {0, 1, 7, 13, 49}) {
    Generator jumped(42);
    jumped.set_offset(start);
    EXPECT_EQ(jumped.NextU32(), draws[start]) << start;
  }
  // set_offset after draws replaces the position, backwards too.
  sequential.set_offset(2);
  EXPECT_EQ(sequential.NextU32(), draws[2]);
  EXPECT_EQ(sequential.offset(), 3u);
}

TEST(GeneratorTest, SameSeedSameStreamOtherSeedOtherStream) {
  Generator a(7), b(7), c(8);
  int equal_to_other_seed = 0;
  for (int i = 0; i < 100; ++i) {
    const uint32_t x = a.NextU32();
    EXPECT_EQ(x, b.NextU32());
    equal_to_other_seed += x == c.NextU32();
  }
  EXPECT_LE(equal_to_other_seed, 1);
  EXPECT_EQ(a.seed(), 7u);
}

TEST(GeneratorTest, UniformFloatUsesTheTop24BitsOfOneDraw) {
  Generator generator(3), raw(3);
  for (int i = 0; i < 100; ++i) {
    const float expected = static_cast<float>(raw.NextU32() >> 8) / 16777216.0f;
    EXPECT_EQ(generator.NextUniformFloat(), expected);
  }
  EXPECT_EQ(generator.offset(), 100u);
}

TEST(GeneratorTest, UniformDoubleUses53BitsOfTwoDraws) {
  Generator generator(5), raw(5);
  for (int i = 0; i < 100; ++i) {
    const double high = raw.NextU32() >> 5;
    const double low = raw.NextU32() >> 6;
    EXPECT_EQ(generator.NextUniformDouble(),
              (high * 67108864.0 + low) / 9007199254740992.0);
  }
  EXPECT_EQ(generator.offset(), 200u);
}

TEST(GeneratorTest, NormalIsBoxMullerOfTwoDraws) {
  Generator generator(9), raw(9);
  for (int i = 0; i < 100; ++i) {
    const double u1 = (raw.NextU32() + 1.0) / 4294967296.0;
    const double u2 = raw.NextU32() / 4294967296.0;
    const double expected = std::sqrt(-2 * std::log(u1)) *
                            std::cos(2 * 3.14159265358979323846 * u2);
    EXPECT_NEAR(generator.NextNormal(), expected, 1e-12);
  }
  EXPECT_EQ(generator.offset(), 200u);
}

struct Moments {
  double mean = 0;
  double variance = 0;
};

Moments ComputeMoments(const std::vector<double>& values) {
  Moments moments;
  for (double v : values) moments.mean += v;
  moments.mean /= values.size();
  for (double v : values) {
    moments.variance += (v - moments.mean) * (v - moments.mean);
  }
  moments.variance /= values.size() - 1;
  return moments;
}

TEST(GeneratorTest, UniformAndNormalMoments) {
  constexpr int kDraws = 200000;
  Generator generator(1234);
  std::vector<double> floats, doubles, normals;
  for (int i = 0; i < kDraws; ++i) {
    const float f = generator.NextUniformFloat();
    const double d = generator.NextUniformDouble();
    ASSERT_TRUE(f >= 0 && f < 1) << f;
    ASSERT_TRUE(d >= 0 && d < 1) << d;
    floats.push_back(f);
    doubles.push_back(d);
    normals.push_back(generator.NextNormal());
  }
  // Standard errors: ~0.00065 on the uniform mean, ~0.0022 on the normal
  // mean, ~0.0032 on the normal variance; bounds are about 5 of them.
  for (const auto& uniform : {floats, doubles}) {
    const Moments moments = ComputeMoments(uniform);
    EXPECT_NEAR(moments.mean, 0.5, 0.003);
    EXPECT_NEAR(moments.variance, 1.0 / 12, 0.001);
  }
  const Moments moments = ComputeMoments(normals);
  EXPECT_NEAR(moments.mean, 0.0, 0.012);
  EXPECT_NEAR(moments.variance, 1.0, 0.016);
  // About 4.55% of a normal lies beyond 2 standard deviations.
  int beyond = 0;
  for (double v : normals) beyond += std::fabs(v) > 2;
  EXPECT_NEAR(static_cast<double>(beyond) / kDraws, 0.0455, 0.003);
}

// ---- Tensor::Uniform and Tensor::Normal. ----

TEST(RandomTensorTest, UniformDrawsElementsInRowMajorOrder) {
  Generator generator(77, 10), raw(77, 10);
  auto tensor = Tensor::Uniform({3, 5}, -2.0, 6.0, generator);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->dtype(), DType::kF32);
  EXPECT_EQ(tensor->shape(), (Shape{3, 5}));
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      const double unit = (raw.NextU32() >> 8) / 16777216.0;
      EXPECT_EQ(tensor->At({i, j}), static_cast<float>(-2.0 + 8.0 * unit));
    }
  }
  EXPECT_EQ(generator.offset(), 25u);
}

TEST(RandomTensorTest, UniformF64UsesDoubleDraws) {
  Generator generator(5), raw(5);
  auto tensor = Tensor::Uniform({4}, 0.0, 1.0, generator, DType::kF64);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  for (int64_t i = 0; i < 4; ++i) {
    const double high = raw.NextU32() >> 5;
    const double low = raw.NextU32() >> 6;
    EXPECT_EQ(tensor->At({i}), (high * 67108864.0 + low) / 9007199254740992.0);
  }
}

TEST(RandomTensorTest, SameSeedGivesTheSameTensorInEveryDType) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    Generator g1(2024), g2(2024);
    auto a = Tensor::Normal({17, 3}, 1.0, 2.0, g1, dtype);
    auto b = Tensor::Normal({17, 3}, 1.0, 2.0, g2, dtype);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->dtype(), dtype);
    EXPECT_EQ(a->ToVector<double>().value(), b->ToVector<double>().value());
  }
}

TEST(RandomTensorTest, ShardsDrawFromTheirGlobalOffset) {
  // A rank holding rows [4, 8) of a [8, 3] tensor draws from offset 12.
  Generator whole_generator(99), shard_generator(99, 12);
  auto whole = Tensor::Uniform({8, 3}, 0.0, 1.0, whole_generator);
  auto shard = Tensor::Uniform({4, 3}, 0.0, 1.0, shard_generator);
  ASSERT_TRUE(whole.ok() && shard.ok());
  auto rows = whole->Narrow(0, 4, 4);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->ToVector<float>().value(), shard->ToVector<float>().value());
}

TEST(RandomTensorTest, RangeAndMoments) {
  Generator generator(31337);
  auto uniform = Tensor::Uniform({100000}, 3.0, 5.0, generator, DType::kF64);
  auto normal = Tensor::Normal({100000}, -1.0, 0.5, generator, DType::kF64);
  ASSERT_TRUE(uniform.ok() && normal.ok());
  const std::vector<double> u = uniform->ToVector<double>().value();
  for (double v : u) ASSERT_TRUE(v >= 3.0 && v < 5.0) << v;
  const Moments u_moments = ComputeMoments(u);
  EXPECT_NEAR(u_moments.mean, 4.0, 0.01);
  EXPECT_NEAR(u_moments.variance, 4.0 / 12, 0.005);
  const Moments n_moments = ComputeMoments(normal->ToVector<double>().value());
  EXPECT_NEAR(n_moments.mean, -1.0, 0.01);
  EXPECT_NEAR(n_moments.variance, 0.25, 0.006);
}

TEST(RandomTensorTest, RejectsIntegerDTypesAndBadParameters) {
  Generator generator(1);
  auto int_uniform = Tensor::Uniform({2}, 0, 1, generator, DType::kI32);
  EXPECT_EQ(int_uniform.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(int_uniform.status().message().find("i32"), std::string::npos);
  auto reversed = Tensor::Uniform({2}, 2, 1, generator);
  EXPECT_EQ(reversed.status().code(), absl::StatusCode::kInvalidArgument);
  auto negative_stddev = Tensor::Normal({2}, 0, -1, generator);
  EXPECT_EQ(negative_stddev.status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative_stddev.status().message().find("-1"), std::string::npos);
  EXPECT_EQ(generator.offset(), 0u);  // Nothing drawn on errors.
}

}  // namespace
}  // namespace dtensor
