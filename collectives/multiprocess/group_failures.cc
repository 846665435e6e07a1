#include "dtensor/collectives/multiprocess/group_failures.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dtensor/collectives/multiprocess/rank_hosts.h"

namespace dtensor {

GroupFailures::GroupFailures(RendezvousSession& session, std::string key_prefix,
                             std::vector<int64_t> group_ranks, int64_t member)
    : session_(session),
      key_prefix_(std::move(key_prefix)),
      group_ranks_(std::move(group_ranks)),
      member_(member),
      arrival_(session.board().NewSlot(
          absl::StrCat(key_prefix_, "arrived/", member))),
      hosts_(ReadRankHosts(session.client(), group_ranks_)) {}

// A post is "<code>\n<1 for send/recv>\n<message>".
absl::Status GroupFailures::Broken() const {
  MutexLock lock(&mu_);
  return broken_;
}

absl::Status GroupFailures::Break(absl::Status status, bool post,
                                  bool point_to_point, bool& first) {
  {
    MutexLock lock(&mu_);
    first = broken_.ok();
    if (!first) return broken_;
    broken_ = status;
  }
  if (post) {  // Best effort: the store may be gone.
    session_.client()
        .Set(absl::StrCat(key_prefix_, "broken/", member_),
             absl::StrCat(static_cast<int>(status.code()), "\n",
                          point_to_point ? 1 : 0, "\n", status.message()))
        .IgnoreError();
  }
  return status;
}

std::optional<GroupFailures::Posted> GroupFailures::PeerFailure() {
  std::vector<std::string> keys;
  for (size_t member = 0; member < group_ranks_.size(); ++member) {
    if (static_cast<int64_t>(member) != member_) {
      keys.push_back(absl::StrCat(key_prefix_, "broken/", member));
    }
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> values =
      session_.client().MultiGet(keys);
  if (!values.ok()) return std::nullopt;
  for (const std::optional<std::string>& value : *values) {
    if (!value.has_value()) continue;
    std::vector<std::string> parts =
        absl::StrSplit(*value, absl::MaxSplits('\n', 2));
    int code = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &code) || code <= 0) {
      continue;  // Malformed: not ours.
    }
    return Posted{absl::Status(static_cast<absl::StatusCode>(code), parts[2]),
                  parts[1] == "1"};
  }
  return std::nullopt;
}

std::vector<int64_t> GroupFailures::ExitedPeers() {
  absl::StatusOr<std::vector<int64_t>> exited = session_.client().ExitedRanks();
  std::vector<int64_t> peers;
  if (!exited.ok()) return peers;
  for (size_t member = 0; member < group_ranks_.size(); ++member) {
    const int64_t global = group_ranks_[member];
    if (static_cast<int64_t>(member) != member_ &&
        std::find(exited->begin(), exited->end(), global) != exited->end()) {
      peers.push_back(global);
    }
  }
  return peers;
}

absl::StatusOr<std::vector<int64_t>> GroupFailures::PeersNotArrived(
    int64_t sequence) {
  std::vector<std::string> keys;
  std::vector<int64_t> members;
  for (size_t member = 0; member < group_ranks_.size(); ++member) {
    if (static_cast<int64_t>(member) == member_) continue;
    keys.push_back(absl::StrCat(key_prefix_, "arrived/", member));
    members.push_back(member);
  }
  absl::StatusOr<std::vector<int64_t>> posted =
      ArrivalBoard::ReadPosts(session_.client(), keys);
  if (!posted.ok()) return posted.status();
  std::vector<int64_t> missing;
  for (size_t i = 0; i < members.size(); ++i) {
    if ((*posted)[i] < sequence) missing.push_back(group_ranks_[members[i]]);
  }
  return missing;
}

std::vector<int64_t> GroupFailures::Peers() const {
  std::vector<int64_t> peers;
  for (size_t member = 0; member < group_ranks_.size(); ++member) {
    if (static_cast<int64_t>(member) != member_) {
      peers.push_back(group_ranks_[member]);
    }
  }
  return peers;
}

std::string GroupFailures::HostsText(absl::Span<const int64_t> ranks) const {
  return HostsOfRanks(ranks, hosts_);
}

absl::Duration ArrivalDelay(absl::Duration deadline) {
  return std::min(deadline / 4, absl::Milliseconds(100));
}

std::string RanksText(absl::Span<const int64_t> ranks) {
  return absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
}

}  // namespace dtensor
