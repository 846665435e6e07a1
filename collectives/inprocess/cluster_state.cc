#include "dtensor/collectives/inprocess/cluster_state.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/collectives/inprocess/group_state.h"

namespace dtensor {

ClusterState::ClusterState(int64_t world_size, CommunicatorOptions options)
    : world_size_(world_size),
      options_(std::move(options)),
      exited_(world_size, false) {}

std::shared_ptr<GroupState> ClusterState::Group(
    const std::vector<int64_t>& ranks, int64_t instance) {
  MutexLock lock(&mu_);
  std::weak_ptr<GroupState>& slot = groups_[{ranks, instance}];
  std::shared_ptr<GroupState> group = slot.lock();
  if (group == nullptr) {
    group = std::make_shared<GroupState>(ranks, shared_from_this());
    slot = group;
  }
  return group;
}

void ClusterState::Abort(int64_t rank, const absl::Status& cause) {
  {
    MutexLock lock(&mu_);
    if (!failure_.has_value()) failure_ = {rank, cause};
  }
  WakeAllGroups();
}

void ClusterState::MarkExited(int64_t rank) {
  {
    MutexLock lock(&mu_);
    exited_[rank] = true;
  }
  WakeAllGroups();
}

absl::Status ClusterState::WaitFailure(absl::Span<const int64_t> missing) {
  MutexLock lock(&mu_);
  if (failure_.has_value()) {
    return absl::UnavailableError(
        absl::StrCat("aborted because rank ", failure_->first,
                     " failed: ", failure_->second.ToString()));
  }
  std::vector<int64_t> gone;
  for (int64_t rank : missing) {
    if (exited_[rank]) gone.push_back(rank);
  }
  if (gone.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "ranks [", absl::StrJoin(gone, ", "), "] exited without joining"));
}

std::optional<std::pair<int64_t, absl::Status>> ClusterState::FirstFailure() {
  MutexLock lock(&mu_);
  return failure_;
}

void ClusterState::WakeAllGroups() {
  std::vector<std::shared_ptr<GroupState>> groups;
  {
    MutexLock lock(&mu_);
    for (auto& [key, weak] : groups_) {
      if (auto group = weak.lock()) groups.push_back(std::move(group));
    }
  }
  // Outside mu_: a group's waiters hold its lock while they call
  // WaitFailure, so the order is always group, then cluster.
  for (const auto& group : groups) group->Wake();
}

}  // namespace dtensor
