#ifndef DTENSOR_OPS_SEQUENCE_BLOCKS_H_
#define DTENSOR_OPS_SEQUENCE_BLOCKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

// The geometry of a sequence split over a context-parallel mesh dim: which
// global positions each rank holds, and which attention calls a block of
// queries makes against a block of keys under the causal mask
// (ops/ring_attention.h runs them).
namespace dtensor {
namespace ops {

// How a sequence is split over the cp dim.
enum class SequenceOrder : uint8_t {
  // Rank r holds the r-th chunk (Shard(seq)'s torch.chunk sizes: any length).
  kContiguous,
  // The sequence cut into 2 * cp equal chunks, rank r holding chunks r and
  // 2 * cp - 1 - r in that order, so that under a causal mask every rank does
  // the same work. The tensor holds the sequence permuted by
  // SequencePositions and is sharded Shard(seq) over the cp dim. Requires a
  // length divisible by 2 * cp.
  kBalanced,
};

// The global position of each element of a sequence of `length` held in
// `order` over `cp` ranks (identity for kContiguous): a permuted sequence's
// element i is the original's element SequencePositions(...)[i], which is how
// inputs are put in balanced order and rotary positions found.
// Errors: cp < 1; a kBalanced length not divisible by 2 * cp (naming both).
absl::StatusOr<std::vector<int64_t>> SequencePositions(int64_t length,
                                                       int64_t cp,
                                                       SequenceOrder order);

// A run of the global sequence that a rank holds: positions
// [start, start + length) at its local rows [local, local + length).
struct SequenceSegment {
  int64_t start = 0;
  int64_t length = 0;
  int64_t local = 0;
};

// The segments that member `member` of `cp` holds of a sequence of `length`
// in `order`, in local order.
// Requires: 0 <= member < cp and a length SequencePositions accepts.
std::vector<SequenceSegment> SegmentsOf(int64_t length, int64_t cp,
                                        int64_t member, SequenceOrder order);

// One attention call of a query segment against a key segment: its rows
// [row_begin, row_end) against the segment's first `keys` keys, with the
// causal mask aligned to the end (ScaledDotProductAttention's) or none.
struct BlockCall {
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int64_t keys = 0;
  bool causal = false;

  friend bool operator==(const BlockCall& a, const BlockCall& b) {
    return a.row_begin == b.row_begin && a.row_end == b.row_end &&
           a.keys == b.keys && a.causal == b.causal;
  }
};

// The calls that give the queries of segment `q` exactly the keys of segment
// `k` they see: all of them without `causal`; with it, the query at position
// p sees the key at position t when t <= p + shift (shift = Lk - Lq, the
// mask aligned to the end). Rows no call covers see no key of `k`; a row
// covered by a causal call may still see none (its lse is -inf).
std::vector<BlockCall> BlockCalls(const SequenceSegment& q,
                                  const SequenceSegment& k, int64_t shift,
                                  bool causal);

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_SEQUENCE_BLOCKS_H_
