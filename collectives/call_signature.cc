#include "dtensor/collectives/call_signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {

absl::Status CheckSameCall(absl::Span<const CallSignature> calls,
                           absl::Span<const int64_t> group_ranks) {
  for (size_t i = 1; i < calls.size(); ++i) {
    if (calls[i].op == calls[0].op && calls[i].key == calls[0].key) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("mismatched collective calls on group [",
                     absl::StrJoin(group_ranks, ", "), "]: rank ",
                     group_ranks[0], " called ", calls[0].text, " but rank ",
                     group_ranks[i], " called ", calls[i].text));
  }
  return absl::OkStatus();
}

}  // namespace dtensor
