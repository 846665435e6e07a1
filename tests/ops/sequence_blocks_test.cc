// The sequence geometry of context parallelism (dtensor/ops/sequence_blocks.h)
// against brute force: the attention calls of a query segment against a key
// segment see exactly the keys the causal mask on global positions lets each
// query see, and the balanced order is the permutation it claims.
#include "dtensor/ops/sequence_blocks.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dtensor::ops {
namespace {

// visible[i][j]: whether row i of `q` sees key j of `k` through `calls`
// (each call: its rows against a key prefix, causal aligned to the end);
// a row covered twice is a failure.
std::vector<std::vector<bool>> SeenThrough(const std::vector<BlockCall>& calls,
                                           int64_t rows, int64_t keys) {
  std::vector<std::vector<bool>> seen(rows, std::vector<bool>(keys, false));
  std::vector<int> covered(rows, 0);
  for (const BlockCall& c : calls) {
    EXPECT_LE(0, c.row_begin);
    EXPECT_LE(c.row_end, rows);
    EXPECT_LE(c.keys, keys);
    const int64_t lq = c.row_end - c.row_begin;
    for (int64_t i = c.row_begin; i < c.row_end; ++i) {
      ++covered[i];
      for (int64_t j = 0; j < c.keys; ++j) {
        seen[i][j] = !c.causal || j <= (i - c.row_begin) + c.keys - lq;
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) EXPECT_LE(covered[i], 1) << "row " << i;
  return seen;
}

TEST(SequenceBlocksTest, CallsSeeExactlyTheMaskedKeys) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> pick(0, 12);
  for (int trial = 0; trial < 4000; ++trial) {
    const SequenceSegment q{pick(rng), pick(rng), 0};
    const SequenceSegment k{pick(rng), pick(rng), 0};
    const int64_t shift = pick(rng) - 6;
    const bool causal = trial % 4 != 0;
    const std::vector<std::vector<bool>> seen =
        SeenThrough(BlockCalls(q, k, shift, causal), q.length, k.length);
    for (int64_t i = 0; i < q.length; ++i) {
      for (int64_t j = 0; j < k.length; ++j) {
        const bool expected = !causal || k.start + j <= q.start + i + shift;
        ASSERT_EQ(seen[i][j], expected)
            << "q [" << q.start << ", +" << q.length << "), k [" << k.start
            << ", +" << k.length << "), shift " << shift << ", row " << i
            << ", key " << j;
      }
    }
  }
}

TEST(SequenceBlocksTest, BalancedOrderGivesRankRChunksRAnd2CpMinus1MinusR) {
  const std::vector<int64_t> positions =
      *SequencePositions(8, 2, SequenceOrder::kBalanced);
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5}));
  for (const int64_t cp : {1, 2, 3, 4}) {
    for (const SequenceOrder order :
         {SequenceOrder::kContiguous, SequenceOrder::kBalanced}) {
      const int64_t length = 2 * cp * 3;
      std::vector<int64_t> sorted = *SequencePositions(length, cp, order);
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < length; ++i) ASSERT_EQ(sorted[i], i);
    }
  }
  EXPECT_EQ(*SequencePositions(7, 4, SequenceOrder::kContiguous),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(SequenceBlocksTest, BalancedOrderNamesALengthItCannotSplit) {
  const absl::StatusOr<std::vector<int64_t>> bad =
      SequencePositions(10, 2, SequenceOrder::kBalanced);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("2 * cp = 4"), std::string::npos);
  EXPECT_NE(bad.status().message().find("10"), std::string::npos);
  EXPECT_FALSE(SequencePositions(8, 0, SequenceOrder::kContiguous).ok());
}

}  // namespace
}  // namespace dtensor::ops
