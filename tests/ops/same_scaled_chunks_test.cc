// ops::SameScaledChunks (the reshape rule's check that a nested split gives
// every rank the same run of a dim group) against enumerating every
// coordinate of the nesting, over random extents, meshes and nestings.
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/shard_geometry.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace ops {
namespace {

// The chunk of [0, extent) at `coord`, split by `nesting` outermost first.
int64_t ChunkAt(int64_t extent, const std::vector<int64_t>& nesting,
                const std::vector<int64_t>& mesh_shape,
                const std::vector<int64_t>& coord) {
  for (int64_t m : nesting)
    extent = ChunkOf(extent, mesh_shape[m], coord[m]).size;
  return extent;
}

// Every coordinate along `nesting`, compared.
bool BruteForce(int64_t a, int64_t p, int64_t b, int64_t q,
                const std::vector<int64_t>& nesting,
                const std::vector<int64_t>& mesh_shape) {
  std::vector<int64_t> coord(mesh_shape.size(), 0);
  while (true) {
    if (ChunkAt(a, nesting, mesh_shape, coord) * p !=
        ChunkAt(b, nesting, mesh_shape, coord) * q) {
      return false;
    }
    int64_t k = static_cast<int64_t>(nesting.size()) - 1;
    for (; k >= 0; --k) {
      if (++coord[nesting[k]] < mesh_shape[nesting[k]]) break;
      coord[nesting[k]] = 0;
    }
    if (k < 0) return true;
  }
}

TEST(SameScaledChunksTest, MatchesEveryCoordinate) {
  std::mt19937 rng(28);
  int agree = 0;
  for (int trial = 0; trial < 40000; ++trial) {
    const int ndim = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> mesh_shape;
    for (int m = 0; m < ndim; ++m) mesh_shape.push_back(1 + rng() % 6);
    std::vector<int64_t> nesting;
    for (int m = 0; m < ndim; ++m) {
      if (rng() % 4 != 0) nesting.push_back(m);
    }
    std::shuffle(nesting.begin(), nesting.end(), rng);
    // A group of numel elements seen as a rows of p and as b rows of q, the
    // rows often of equal totals (the reshape case).
    const int64_t a = rng() % 40;
    const int64_t p = 1 + rng() % 6;
    int64_t b = rng() % 40;
    int64_t q = 1 + rng() % 6;
    if (rng() % 2 == 0 && a * p % q == 0) b = a * p / q;
    if (rng() % 4 == 0) {
      b = a;
      q = p;
    }
    SCOPED_TRACE(absl::StrCat("a=", a, " p=", p, " b=", b, " q=", q, " mesh [",
                              absl::StrJoin(mesh_shape, ","), "] nesting [",
                              absl::StrJoin(nesting, ","), "]"));
    const bool expected = BruteForce(a, p, b, q, nesting, mesh_shape);
    agree += expected;
    ASSERT_EQ(SameScaledChunks(a, p, b, q, nesting, mesh_shape), expected);
  }
  // Both answers occur often.
  EXPECT_GT(agree, 2000);
  EXPECT_LT(agree, 38000);
}

TEST(SameScaledChunksTest, ManyRanksInClosedForm) {
  // 4096 x 8 ranks: [24, 4096] -> [98304]: the rows of 4096 split by 8
  // then by 4096 are empty past the first 24 ranks on both sides.
  const std::vector<int64_t> mesh = {4096, 8};
  EXPECT_TRUE(SameScaledChunks(24, 4096, 98304, 1, {1}, mesh));
  EXPECT_FALSE(SameScaledChunks(24, 4096, 98304, 1, {0, 1}, mesh));
  EXPECT_TRUE(SameScaledChunks(32768, 3, 32768 * 3, 1, {0, 1}, mesh));
}

}  // namespace
}  // namespace ops
}  // namespace dtensor
