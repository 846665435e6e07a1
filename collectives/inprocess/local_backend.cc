#include "dtensor/collectives/inprocess/local_backend.h"

#include <algorithm>
#include <utility>

#include "dtensor/base/status_macros.h"

namespace dtensor {

LocalBackend::LocalBackend(std::shared_ptr<ClusterState> cluster, int64_t rank)
    : cluster_(std::move(cluster)), rank_(rank) {}

absl::StatusOr<std::shared_ptr<Communicator>> LocalBackend::CreateCommunicator(
    std::vector<int64_t> ranks) {
  DT_RETURN_IF_ERROR(CheckGroupMembers(ranks, rank_, world_size()));
  MutexLock lock(&mu_);
  const int64_t instance = instances_[ranks]++;
  std::shared_ptr<GroupState> group = cluster_->Group(ranks, instance);
  const int64_t index =
      std::find(ranks.begin(), ranks.end(), rank_) - ranks.begin();
  auto communicator = std::make_shared<InProcessCommunicator>(
      std::move(ranks), index, cluster_->options(), std::move(group));
  created_.push_back(communicator);
  return communicator;
}

void LocalBackend::WaitIdle() {
  MutexLock lock(&mu_);
  for (const auto& communicator : created_) communicator->WaitIdle();
}

}  // namespace dtensor
