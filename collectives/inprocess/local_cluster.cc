#include "dtensor/collectives/inprocess/local_cluster.h"

#include <exception>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/collectives/host_staging.h"
#include "dtensor/collectives/inprocess/cluster_state.h"
#include "dtensor/collectives/inprocess/local_backend.h"

namespace dtensor {
namespace {

// `fn`'s status on this rank, with exceptions turned into errors.
absl::Status RunGuarded(const LocalCluster::RankFunction& fn,
                        ProcessGroups& groups, int64_t rank) {
  try {
    return fn(groups);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("rank ", rank, " threw an exception: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat("rank ", rank, " threw a non-standard exception"));
  }
}

}  // namespace

LocalCluster::LocalCluster(int64_t world_size, CommunicatorOptions options,
                           Device device)
    : world_size_(world_size), options_(std::move(options)), device_(device) {}

std::vector<absl::Status> LocalCluster::RunPerRank(
    const RankFunction& fn) const {
  absl::Status first_failure;
  return RunRanks(fn, &first_failure);
}

absl::Status LocalCluster::Run(const RankFunction& fn) const {
  absl::Status first_failure;
  RunRanks(fn, &first_failure);
  return first_failure;
}

std::vector<absl::Status> LocalCluster::RunRanks(
    const RankFunction& fn, absl::Status* first_failure) const {
  if (world_size_ < 1) {
    *first_failure = absl::InvalidArgumentError(absl::StrCat(
        "LocalCluster: the world size must be at least 1, got ", world_size_));
    return {*first_failure};
  }
  auto cluster = std::make_shared<ClusterState>(world_size_, options_);
  std::vector<absl::Status> statuses(world_size_);
  std::vector<std::thread> threads;
  threads.reserve(world_size_);
  for (int64_t rank = 0; rank < world_size_; ++rank) {
    threads.emplace_back([this, &fn, &cluster, &statuses, rank] {
      auto backend = std::make_shared<LocalBackend>(cluster, rank);
      ProcessGroups groups(StagedThroughHost(backend, device_));
      absl::Status status = RunGuarded(fn, groups, rank);
      if (!status.ok()) cluster->Abort(rank, status);
      // Calls left in flight still meet their peers: let them finish before
      // the peers learn that this rank is gone.
      backend->WaitIdle();
      cluster->MarkExited(rank);
      statuses[rank] = std::move(status);
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (auto failure = cluster->FirstFailure()) {
    const auto& [rank, status] = *failure;
    *first_failure = absl::Status(
        status.code(), absl::StrCat("rank ", rank, ": ", status.message()));
  }
  return statuses;
}

}  // namespace dtensor
