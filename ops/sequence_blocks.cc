#include "dtensor/ops/sequence_blocks.h"

#include "absl/strings/str_cat.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace ops {

absl::StatusOr<std::vector<int64_t>> SequencePositions(int64_t length,
                                                       int64_t cp,
                                                       SequenceOrder order) {
  if (cp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallelism over ", cp, " ranks"));
  }
  if (order == SequenceOrder::kBalanced && length % (2 * cp) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a balanced sequence order needs a length divisible by 2 * cp = ",
        2 * cp, "; the length is ", length));
  }
  std::vector<int64_t> positions;
  positions.reserve(length);
  for (int64_t member = 0; member < cp; ++member) {
    for (const SequenceSegment& s : SegmentsOf(length, cp, member, order)) {
      for (int64_t i = 0; i < s.length; ++i) positions.push_back(s.start + i);
    }
  }
  return positions;
}

std::vector<SequenceSegment> SegmentsOf(int64_t length, int64_t cp,
                                        int64_t member, SequenceOrder order) {
  if (order == SequenceOrder::kContiguous) {
    const ChunkRange chunk = ChunkOf(length, cp, member);
    return {{chunk.offset, chunk.size, 0}};
  }
  const int64_t chunk = length / (2 * cp);
  return {{member * chunk, chunk, 0},
          {(2 * cp - 1 - member) * chunk, chunk, chunk}};
}

std::vector<BlockCall> BlockCalls(const SequenceSegment& q,
                                  const SequenceSegment& k, int64_t shift,
                                  bool causal) {
  if (q.length == 0 || k.length == 0) return {};
  // Row i of q sees key j of k when j <= i + d.
  const int64_t d = q.start + shift - k.start;
  if (!causal || d >= k.length - 1) return {{0, q.length, k.length, false}};
  if (q.length + d <= 0) return {};
  // Keys from q.length + d on are past every row; the rest, aligned to the
  // end, are the causal mask with lk - lq = d.
  if (q.length + d <= k.length) return {{0, q.length, q.length + d, true}};
  // Rows from k.length - d on see every key; those before, a causal prefix.
  const int64_t split = k.length - d;
  return {{0, split, k.length, true}, {split, q.length, k.length, false}};
}

}  // namespace ops
}  // namespace dtensor
