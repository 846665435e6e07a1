#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/tensor/cuda/caching_allocator.h"
#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

// A backing allocator that hands out fake addresses and records every call;
// `fail_above` makes requests fail once that many bytes are live in it.
struct FakeBacking {
  int64_t allocs = 0;
  int64_t frees = 0;
  int64_t live_bytes = 0;
  int64_t fail_above = INT64_MAX;
  uintptr_t next = 0x1000;
  std::map<void*, size_t> live;

  CachingAllocator Make() {
    return CachingAllocator(
        [this](size_t n) -> absl::StatusOr<void*> {
          if (live_bytes + static_cast<int64_t>(n) > fail_above) {
            return absl::ResourceExhaustedError("fake out of memory");
          }
          ++allocs;
          live_bytes += static_cast<int64_t>(n);
          void* ptr = reinterpret_cast<void*>(next);
          next += n + 4096;
          live[ptr] = n;
          return ptr;
        },
        [this](void* ptr) {
          ++frees;
          live_bytes -= static_cast<int64_t>(live[ptr]);
          live.erase(ptr);
        });
  }
};

TEST(CachingAllocatorTest, RoundsToBins) {
  EXPECT_EQ(CachingAllocator::RoundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(1 << 20), 1u << 20);
  EXPECT_EQ(CachingAllocator::RoundSize((1 << 20) + 1), 2u << 20);
  EXPECT_EQ(CachingAllocator::RoundSize((5 << 20) + 3), 6u << 20);
}

// A loop that allocates the same sizes every step reaches the backing
// allocator only in its first step.
TEST(CachingAllocatorTest, SteadyStateNeedsNoBackingAllocations) {
  FakeBacking backing;
  CachingAllocator allocator = backing.Make();
  const std::vector<size_t> step = {100, 4096, 3 << 20, 100, 777, 64 << 20};
  for (int iteration = 0; iteration < 5; ++iteration) {
    std::vector<void*> held;
    for (size_t n : step) {
      absl::StatusOr<void*> ptr = allocator.Allocate(n);
      ASSERT_TRUE(ptr.ok()) << ptr.status();
      held.push_back(*ptr);
    }
    EXPECT_EQ(std::set<void*>(held.begin(), held.end()).size(), held.size());
    for (void* ptr : held) allocator.Free(ptr);
    EXPECT_EQ(backing.allocs, static_cast<int64_t>(step.size())) << iteration;
  }
  const MemoryStats stats = allocator.Stats();
  EXPECT_EQ(stats.backing_allocations, 6);
  EXPECT_EQ(stats.cache_hits, 4 * 6);
  EXPECT_EQ(stats.allocated, 0);
  EXPECT_EQ(stats.reserved, backing.live_bytes);
  EXPECT_EQ(backing.frees, 0);
}

TEST(CachingAllocatorTest, StatisticsTrackAllocatedReservedAndPeak) {
  FakeBacking backing;
  CachingAllocator allocator = backing.Make();
  void* a = *allocator.Allocate(1000);     // 1024
  void* b = *allocator.Allocate(2 << 20);  // 2 MiB
  MemoryStats stats = allocator.Stats();
  EXPECT_EQ(stats.allocated, 1024 + (2 << 20));
  EXPECT_EQ(stats.reserved, 1024 + (2 << 20));
  EXPECT_EQ(stats.peak_allocated, stats.allocated);
  allocator.Free(b);
  stats = allocator.Stats();
  EXPECT_EQ(stats.allocated, 1024);
  EXPECT_EQ(stats.reserved, 1024 + (2 << 20));  // Cached, still reserved.
  EXPECT_EQ(stats.peak_allocated, 1024 + (2 << 20));
  allocator.ResetPeak();
  EXPECT_EQ(allocator.Stats().peak_allocated, 1024);
  allocator.EmptyCache();
  stats = allocator.Stats();
  EXPECT_EQ(stats.reserved, 1024);
  EXPECT_EQ(backing.frees, 1);
  allocator.Free(a);
  allocator.Free(a);  // A second free is ignored.
  EXPECT_EQ(allocator.Stats().allocated, 0);
}

TEST(CachingAllocatorTest, ReusesOnlyFittingBlocksOfTheSameStream) {
  FakeBacking backing;
  CachingAllocator allocator = backing.Make();
  void* big = *allocator.Allocate(8 << 20, /*stream=*/1);
  allocator.Free(big);
  // Too small to take an 8 MiB block (more than half would be wasted).
  void* small = *allocator.Allocate(1 << 20, 1);
  EXPECT_NE(small, big);
  // Another stream does not take stream 1's block.
  void* other = *allocator.Allocate(8 << 20, 2);
  EXPECT_NE(other, big);
  // The same stream and a fitting size do.
  EXPECT_EQ(*allocator.Allocate(6 << 20, 1), big);
  EXPECT_EQ(backing.allocs, 3);
}

TEST(CachingAllocatorTest, EmptiesTheCacheAndRetriesWhenBackingFails) {
  FakeBacking backing;
  backing.fail_above = 9 << 20;
  CachingAllocator allocator = backing.Make();
  void* a = *allocator.Allocate(8 << 20);
  allocator.Free(a);
  // 2 MiB does not reuse the 8 MiB block (it would waste more than half) and
  // does not fit beside it: the cache is emptied, then the request succeeds.
  absl::StatusOr<void*> b = allocator.Allocate(2 << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(backing.frees, 1);
  EXPECT_EQ(allocator.Stats().reserved, 2 << 20);
  // Nothing cached to give back: the failure is reported.
  absl::StatusOr<void*> c = allocator.Allocate(8 << 20);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(CachingAllocatorTest, DestructionReturnsEveryBlock) {
  FakeBacking backing;
  {
    CachingAllocator allocator = backing.Make();
    void* a = *allocator.Allocate(10);
    *allocator.Allocate(20);
    allocator.Free(a);
  }
  EXPECT_EQ(backing.frees, 2);
  EXPECT_TRUE(backing.live.empty());
}

// While a pool is active on a stream, the stream's allocations come from the
// pool: its own free blocks first, then the shared cache's (which join it),
// then the backing allocator. Other streams are served as before.
TEST(CachingAllocatorPoolTest, ActivePoolServesItsStream) {
  FakeBacking backing;
  CachingAllocator allocator = backing.Make();
  void* cached = *allocator.Allocate(4096, /*stream=*/1);
  allocator.Free(cached);
  absl::StatusOr<CachingAllocator::PoolId> pool = allocator.BeginPool(1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_NE(*pool, 0u);
  // The shared cache's block joins the pool.
  void* a = *allocator.Allocate(4096, 1);
  EXPECT_EQ(a, cached);
  void* b = *allocator.Allocate(4096, 1);  // Grows the pool.
  EXPECT_NE(b, a);
  EXPECT_EQ(backing.allocs, 2);
  EXPECT_EQ(allocator.PoolBytes(*pool), 2 * 4096);
  // Within the capture a freed pool block is reused (one stream, in order).
  allocator.Free(a);
  EXPECT_EQ(*allocator.Allocate(4096, 1), a);
  // Another stream is not served from the pool.
  void* other = *allocator.Allocate(4096, 2);
  EXPECT_NE(other, a);
  EXPECT_NE(other, b);
  EXPECT_EQ(allocator.PoolBytes(*pool), 2 * 4096);
  // A second pool, on this stream or another, is refused until the first
  // is released, also once the first is no longer active.
  for (const uintptr_t stream : {1, 2}) {
    absl::StatusOr<CachingAllocator::PoolId> again =
        allocator.BeginPool(stream);
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(again.status().message().find("not released yet"),
              absl::string_view::npos)
        << again.status();
  }
  allocator.EndPool(1);
  EXPECT_FALSE(allocator.BeginPool(2).ok());
  allocator.ReleasePool(*pool);
  EXPECT_TRUE(allocator.BeginPool(2).ok());
}

// A pool block freed during or after the capture stays in the pool: no
// later allocation outside the pool gets it. An ordinary block freed during
// the capture is retired to the pool unused (the replays may read what it
// held before the capture), not even reused within the capture.
TEST(CachingAllocatorPoolTest, FreedPoolBlocksNeverServeOthers) {
  FakeBacking backing;
  CachingAllocator allocator = backing.Make();
  void* before = *allocator.Allocate(1000, 1);  // Ordinary, 1024 bytes.
  const CachingAllocator::PoolId pool = *allocator.BeginPool(1);
  void* during = *allocator.Allocate(1000, 1);
  void* kept = *allocator.Allocate(2 << 20, 1);
  allocator.Free(before);  // An ordinary block freed inside the capture.
  void* next = *allocator.Allocate(1000, 1);
  EXPECT_NE(next, before) << "a retired block is not reused";
  allocator.Free(during);  // A pool block freed inside the capture...
  EXPECT_EQ(*allocator.Allocate(1000, 1), during);  // ...is reused there.
  allocator.Free(during);
  allocator.Free(next);
  allocator.EndPool(1);
  allocator.Free(kept);  // A pool block freed after the capture.
  EXPECT_EQ(allocator.PoolBytes(pool), 3 * 1024 + (2 << 20));
  const std::set<void*> pool_blocks = {before, during, next, kept};
  for (size_t n : {1000, 1000, 1000, 1000, 2 << 20}) {
    void* fresh = *allocator.Allocate(n, 1);
    EXPECT_EQ(pool_blocks.count(fresh), 0u) << n;
  }
  // EmptyCache keeps the pool's blocks: the graph still uses them.
  allocator.EmptyCache();
  for (void* ptr : pool_blocks) EXPECT_EQ(backing.live.count(ptr), 1u);
  // Released, the free and retired blocks serve ordinary requests again.
  allocator.ReleasePool(pool);
  std::set<void*> reused;
  for (int i = 0; i < 3; ++i) reused.insert(*allocator.Allocate(1000, 1));
  EXPECT_EQ(reused, (std::set<void*>{before, during, next}));
}

// Releasing a pool puts its free blocks in the shared cache, and its blocks
// still in use go there once freed; the pool's id no longer owns anything.
TEST(CachingAllocatorPoolTest, ReleaseReturnsBlocksToTheSharedCache) {
  FakeBacking backing;
  CachingAllocator allocator = backing.Make();
  const CachingAllocator::PoolId pool = *allocator.BeginPool(1);
  void* freed = *allocator.Allocate(3 << 20, 1);
  void* held = *allocator.Allocate(512, 1);
  allocator.Free(freed);
  allocator.EndPool(1);
  allocator.ReleasePool(pool);
  EXPECT_EQ(allocator.PoolBytes(pool), 0);
  EXPECT_EQ(*allocator.Allocate(3 << 20, 1), freed);
  allocator.Free(held);
  EXPECT_EQ(*allocator.Allocate(512, 1), held);
  EXPECT_EQ(backing.allocs, 2);
  // Released blocks are ordinary: EmptyCache returns them when free.
  allocator.Free(freed);
  allocator.Free(held);
  allocator.EmptyCache();
  EXPECT_TRUE(backing.live.empty());
  EXPECT_EQ(allocator.Stats().reserved, 0);
  // A new pool on the stream may begin; releasing an unknown id is ignored.
  EXPECT_TRUE(allocator.BeginPool(1).ok());
  allocator.ReleasePool(pool + 100);
}

// While a pool is active, a failing backing allocation is reported rather
// than retried after emptying the cache (cudaFree may not run during a
// capture).
TEST(CachingAllocatorPoolTest, NoCacheEmptyingWhileAPoolIsActive) {
  FakeBacking backing;
  backing.fail_above = 9 << 20;
  CachingAllocator allocator = backing.Make();
  allocator.Free(*allocator.Allocate(8 << 20, 2));
  const CachingAllocator::PoolId pool = *allocator.BeginPool(1);
  absl::StatusOr<void*> b = allocator.Allocate(2 << 20, 1);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backing.frees, 0);
  allocator.EndPool(1);
  allocator.ReleasePool(pool);
  EXPECT_TRUE(allocator.Allocate(2 << 20, 1).ok());
  EXPECT_EQ(backing.frees, 1);
}

}  // namespace
}  // namespace dtensor::cuda
