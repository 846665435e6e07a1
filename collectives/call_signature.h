#ifndef DTENSOR_COLLECTIVES_CALL_SIGNATURE_H_
#define DTENSOR_COLLECTIVES_CALL_SIGNATURE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace dtensor {

// What one rank called, as debug mode compares it across the ranks of a
// group. Plain strings, so that a backend can ship it between processes.
struct CallSignature {
  // The operation: "all_reduce", "all_gather", ...
  std::string op;
  // The arguments every rank of the group must pass identically (dtype, dims,
  // piece sizes, root, ...), in a canonical form.
  std::string key;
  // The whole call, for error messages: "all_reduce #3 (op=sum, f32[4, 8])".
  std::string text;
};

// OK when every rank made the same call (equal op and key). Otherwise an
// InvalidArgument error that names the group and shows the call of rank 0
// and the first call that differs from it, with their global ranks; every
// rank that checks the same calls gets the same message. `calls[i]` is the
// call of `group_ranks[i]`.
absl::Status CheckSameCall(absl::Span<const CallSignature> calls,
                           absl::Span<const int64_t> group_ranks);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_CALL_SIGNATURE_H_
