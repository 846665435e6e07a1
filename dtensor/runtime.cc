#include "dtensor/runtime.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {

std::shared_ptr<Runtime> Runtime::ForRank(ProcessGroups& groups) {
  return std::shared_ptr<Runtime>(new Runtime(&groups, groups.rank()));
}

std::shared_ptr<Runtime> Runtime::MetadataOnly(int64_t rank) {
  return std::shared_ptr<Runtime>(new Runtime(nullptr, rank));
}

absl::Status Runtime::CheckMesh(const DeviceMesh& mesh) const {
  if (groups_ == nullptr) return absl::OkStatus();
  const int64_t world = groups_->world_size();
  for (int64_t rank : mesh.rank_list()) {
    if (rank < world) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh of ", mesh.size(), " ranks [", absl::StrJoin(mesh.shape(), ", "),
        "]", " has rank ", rank, ", outside the world of ", world, " ranks"));
  }
  return absl::OkStatus();
}

absl::Status Runtime::SetLinks(const DeviceMesh& mesh,
                               std::vector<MeshDimLink> links) {
  if (static_cast<int64_t>(links.size()) != mesh.ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat(links.size(), " links given for mesh ", mesh.ToString(),
                     " of ", mesh.ndim(), " dims"));
  }
  absl::StatusOr<CostModel> model = CostModel::Create(std::move(links));
  if (!model.ok()) return model.status();
  MutexLock lock(&mu_);
  cost_models_.insert_or_assign(mesh, *std::move(model));
  has_links_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

CostModel Runtime::CostModelFor(const DeviceMesh& mesh) const {
  MutexLock lock(&mu_);
  auto it = cost_models_.find(mesh);
  return it != cost_models_.end() ? it->second : CostModel(mesh.ndim());
}

}  // namespace dtensor
