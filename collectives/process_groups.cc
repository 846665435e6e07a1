#include "dtensor/collectives/process_groups.h"

#include <numeric>
#include <utility>

#include "dtensor/base/status_macros.h"

namespace dtensor {

ProcessGroups::ProcessGroups(std::shared_ptr<Backend> backend)
    : backend_(std::move(backend)) {}

absl::StatusOr<std::shared_ptr<Communicator>> ProcessGroups::World() {
  std::vector<int64_t> ranks(world_size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return ForRanks(ranks);
}

absl::StatusOr<std::shared_ptr<Communicator>> ProcessGroups::ForRanks(
    absl::Span<const int64_t> ranks) {
  std::vector<int64_t> key(ranks.begin(), ranks.end());
  MutexLock lock(&mu_);
  auto cached = cache_.find(key);
  if (cached != cache_.end()) return cached->second;
  DT_RETURN_IF_ERROR(CheckGroupMembers(key, rank(), world_size()));
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> communicator,
                      backend_->CreateCommunicator(key));
  cache_.emplace(std::move(key), communicator);
  return communicator;
}

int64_t ProcessGroups::num_cached() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(cache_.size());
}

absl::StatusOr<std::shared_ptr<Communicator>> ProcessGroups::ForMeshDims(
    const DeviceMesh& mesh, absl::Span<const int64_t> dims) {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> group, mesh.GroupOf(rank(), dims));
  return ForRanks(group);
}

absl::StatusOr<std::shared_ptr<Communicator>> ProcessGroups::ForMeshDimNames(
    const DeviceMesh& mesh, absl::Span<const std::string> names) {
  std::vector<int64_t> dims;
  for (const std::string& name : names) {
    DT_ASSIGN_OR_RETURN(int64_t dim, mesh.DimIndex(name));
    dims.push_back(dim);
  }
  return ForMeshDims(mesh, dims);
}

}  // namespace dtensor
