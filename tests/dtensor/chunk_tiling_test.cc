#include "dtensor/redistribute/chunk_tiling.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/shard_geometry.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// Brute force: every chunk of every coordinate, split as ShardBlockAt splits
// a tensor dim (outermost mesh dim first), the non-empty ones in order.
std::vector<std::pair<int64_t, int64_t>> NonEmptyRanges(
    int64_t extent, const std::vector<int64_t>& sizes) {
  std::vector<std::pair<int64_t, int64_t>> ranges = {{0, extent}};
  for (int64_t n : sizes) {
    std::vector<std::pair<int64_t, int64_t>> split;
    for (const auto& [offset, size] : ranges) {
      for (int64_t i = 0; i < n; ++i) {
        const ChunkRange chunk = ChunkOf(size, n, i);
        split.emplace_back(offset + chunk.offset, chunk.size);
      }
    }
    ranges = std::move(split);
  }
  std::vector<std::pair<int64_t, int64_t>> non_empty;
  for (const auto& range : ranges) {
    if (range.second > 0) non_empty.push_back(range);
  }
  std::sort(non_empty.begin(), non_empty.end());
  return non_empty;
}

void ExpectMatchesBruteForce(int64_t extent, const std::vector<int64_t>& a,
                             const std::vector<int64_t>& b) {
  EXPECT_EQ(SameNonEmptyChunks(extent, a, b),
            NonEmptyRanges(extent, a) == NonEmptyRanges(extent, b))
      << "extent " << extent << ", sizes [" << absl::StrJoin(a, ",")
      << "] and [" << absl::StrJoin(b, ",") << "]";
}

TEST(SameNonEmptyChunksTest, KnownCases) {
  EXPECT_TRUE(SameNonEmptyChunks(5, {2, 2}, {2, 2}));
  // 5 in 4: 2,2,1; in 2 then 2: 3 -> 2,1 and 2 -> 1,1.
  EXPECT_FALSE(SameNonEmptyChunks(5, {4}, {2, 2}));
  // Size-1 mesh dims split nothing.
  EXPECT_TRUE(SameNonEmptyChunks(7, {1, 3, 1}, {3}));
  EXPECT_TRUE(SameNonEmptyChunks(0, {4, 3}, {3, 4}));
  // 8192 rows on dp=4096 x tp=8 in either order: all 8192 chunks of 1.
  EXPECT_TRUE(SameNonEmptyChunks(8192, {4096, 8}, {8, 4096}));
  EXPECT_TRUE(SameNonEmptyChunks(8192, {4096, 8}, {32768}));
}

TEST(SameNonEmptyChunksTest, LargeMeshesMatchBruteForce) {
  for (int64_t extent : {8190, 8192, 12345, 32767, 40000}) {
    ExpectMatchesBruteForce(extent, {4096, 8}, {8, 4096});
    ExpectMatchesBruteForce(extent, {1024, 4, 8}, {8, 1024, 4});
    ExpectMatchesBruteForce(extent, {64, 8}, {512});
  }
}

// Random extents and mesh sizes: the other split a reordering of the first
// (the planner's permutes), a refactoring of its product, or random.
TEST(SameNonEmptyChunksTest, RandomSplitsMatchBruteForce) {
  std::mt19937 rng(28);
  std::uniform_int_distribution<int64_t> extent_of(0, 300);
  std::uniform_int_distribution<int64_t> size_of(1, 7);
  std::uniform_int_distribution<int> count_of(0, 4);
  int same = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int64_t extent = extent_of(rng);
    std::vector<int64_t> a(count_of(rng));
    for (int64_t& size : a) size = size_of(rng);
    std::vector<int64_t> b = a;
    switch (trial % 3) {
      case 0:
        std::shuffle(b.begin(), b.end(), rng);
        break;
      case 1: {
        int64_t product = 1;
        for (int64_t size : a) product *= size;
        b = {product};
        break;
      }
      default:
        b.resize(count_of(rng));
        for (int64_t& size : b) size = size_of(rng);
    }
    ExpectMatchesBruteForce(extent, a, b);
    same += SameNonEmptyChunks(extent, a, b);
  }
  // Both answers occur often enough for the comparison to mean something.
  EXPECT_GT(same, 2000);
  EXPECT_LT(same, 18000);
}

}  // namespace
}  // namespace dtensor
