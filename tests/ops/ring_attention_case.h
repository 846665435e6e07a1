#ifndef DTENSOR_TESTS_OPS_RING_ATTENTION_CASE_H_
#define DTENSOR_TESTS_OPS_RING_ATTENTION_CASE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/ops/sequence_blocks.h"

// One rank's part of a ring attention check (dtensor/ops/ring_attention.h)
// against the single-rank program, shared by the in-process test
// (ring_attention_test.cc) and the worker that runs the same cases as one
// process per rank over Gloo (ring_attention_worker.cc).
namespace dtensor::ops::testing {

struct RingCase {
  std::vector<int64_t> mesh;  // {cp} or {dp, cp}
  SequenceOrder order;
  bool causal;
  int64_t length;
  std::string Name() const;
};

// The cases on `world_size` ranks: meshes {2} (2 ranks), {4} and {2, 2}
// (4 ranks) in both orders, causal or not, length 16; on {4} also the
// uneven lengths 7, 9 and 3 in contiguous order.
std::vector<RingCase> RingCases(int64_t world_size);

// Runs `c` as rank groups.rank() of a world of the case's mesh size: the
// ring's forward and backward on q [2, kv heads 2, group 2, L, 8], k, v
// [2, 2, 1, L, 8 | 4] (grouped-query heads) drawn in float64, against
// ScaledDotProductAttention and its backward on the whole tensors (within
// 1e-10), and the ring's collectives counted (2 (cp - 1) permutes forward,
// 2 (cp - 1) + 2 cp backward).
// Errors: Internal naming the case and what differed; a world that is not
// the mesh's size; what the ops report.
absl::Status CheckRingCase(ProcessGroups& groups, const RingCase& c);

}  // namespace dtensor::ops::testing

#endif  // DTENSOR_TESTS_OPS_RING_ATTENTION_CASE_H_
