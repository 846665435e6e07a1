#include "dtensor/tensor/large_buffer_cache.h"

#include <cstdint>
#include <cstring>

#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr size_t kBlock = LargeBufferCache::kMinBytes;

TEST(LargeBufferCacheTest, ReusesAReleasedBufferOfTheSameSize) {
  LargeBufferCache cache(4 * kBlock);
  void* first = cache.Allocate(2 * kBlock);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % kBlock, 0u);
  std::memset(first, 1, 2 * kBlock);
  cache.Release(first, 2 * kBlock);
  EXPECT_EQ(cache.idle_bytes(), 2 * kBlock);
  // Another size does not take it; the same size does.
  void* other = cache.Allocate(kBlock);
  EXPECT_NE(other, first);
  EXPECT_EQ(cache.Allocate(2 * kBlock), first);
  EXPECT_EQ(cache.idle_bytes(), 0u);
  cache.Release(other, kBlock);
  cache.Release(first, 2 * kBlock);
}

TEST(LargeBufferCacheTest, FreesWhatExceedsTheBudget) {
  LargeBufferCache cache(3 * kBlock);
  void* a = cache.Allocate(2 * kBlock);
  void* b = cache.Allocate(2 * kBlock);
  cache.Release(a, 2 * kBlock);
  cache.Release(b, 2 * kBlock);  // Over budget: freed, not kept.
  EXPECT_EQ(cache.idle_bytes(), 2 * kBlock);
}

TEST(LargeBufferCacheTest, LargeTensorsRecycleTheirStorage) {
  const int64_t n = static_cast<int64_t>(4 * kBlock / sizeof(float));
  void* data = nullptr;
  {
    Tensor t = Tensor::Ones({n}, DType::kF32).value();
    data = t.raw_data();
  }
  Tensor again = Tensor::Zeros({n}, DType::kF32).value();
  EXPECT_EQ(again.raw_data(), data);
  EXPECT_EQ(again.At({n - 1}), 0.0);  // Reused memory is still initialized.
}

}  // namespace
}  // namespace dtensor
