#ifndef DTENSOR_COLLECTIVES_INPROCESS_SHARED_MEMORY_OPS_H_
#define DTENSOR_COLLECTIVES_INPROCESS_SHARED_MEMORY_OPS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/collectives/inprocess/posting.h"

namespace dtensor {

// The collectives of the in-process backend, run by every rank of a group
// once all postings are exchanged. Each rank reads its peers' tensors in
// place and writes only its own outputs ("pull"; all_reduce is the
// exception below); `barrier` separates phases
// and ends every data-moving op, so that no rank leaves (and lets its caller
// reuse its tensors) while a peer may still read them.
//
// Each op first checks the postings against each other. Every rank checks
// the same postings the same way, so a mismatch fails on every rank with the
// same message, before any data moves.
struct PhaseContext {
  const Postings& all;
  int64_t me;  // This rank's index in the group.
  absl::Span<const int64_t> group_ranks;
  // "all_gather #3 on group [0, 1]": the start of error messages.
  absl::string_view name;
  absl::FunctionRef<absl::Status()> barrier;
};

// all_reduce as a reduce-scatter fused with an all-gather in shared memory:
// rank r reduces slice r of every rank's buffer and writes the result into
// slice r of every buffer, in one pass (nobody else touches slice r).
absl::Status RunAllReduce(const PhaseContext& context);
absl::Status RunAllGather(const PhaseContext& context);
absl::Status RunReduceScatter(const PhaseContext& context);
absl::Status RunAllToAll(const PhaseContext& context);
absl::Status RunBroadcast(const PhaseContext& context);
absl::Status RunScatter(const PhaseContext& context);
absl::Status RunGather(const PhaseContext& context);
absl::Status RunPermute(const PhaseContext& context);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_SHARED_MEMORY_OPS_H_
