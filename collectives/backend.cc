#include "dtensor/collectives/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {

absl::Status CheckGroupMembers(absl::Span<const int64_t> ranks, int64_t rank,
                               int64_t world_size) {
  const std::string group = absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
  if (ranks.empty()) {
    return absl::InvalidArgumentError("a group needs at least one rank");
  }
  std::vector<bool> seen(world_size, false);
  for (int64_t member : ranks) {
    if (member < 0 || member >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", group, ": rank ", member,
                       " is not in a world of ", world_size, " ranks"));
    }
    if (seen[member]) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", group, ": rank ", member, " is listed twice"));
    }
    seen[member] = true;
  }
  if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group ", group, " does not contain the calling rank ", rank));
  }
  return absl::OkStatus();
}

}  // namespace dtensor
