#include "dtensor/dtensor_spec.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::StatusOr<DTensorSpec> DTensorSpec::Create(
    DeviceMesh mesh, absl::Span<const Placement> placements,
    std::vector<int64_t> shape, DType dtype, const ShardOrder& order) {
  if (static_cast<int64_t>(placements.size()) != mesh.ndim()) {
    std::vector<std::string> texts;
    for (const Placement& p : placements) texts.push_back(p.ToString());
    return absl::InvalidArgumentError(
        absl::StrCat(placements.size(), " placements (",
                     absl::StrJoin(texts, ","), ") for the ", mesh.ndim(),
                     "-d mesh ", mesh.ToString(), ": give one per mesh dim"));
  }
  DT_ASSIGN_OR_RETURN(
      Sharding sharding,
      Sharding::FromPlacements(placements, static_cast<int64_t>(shape.size()),
                               order));
  return Create(std::move(mesh), sharding, std::move(shape), dtype);
}

absl::StatusOr<DTensorSpec> DTensorSpec::Create(DeviceMesh mesh,
                                                Sharding sharding,
                                                std::vector<int64_t> shape,
                                                DType dtype) {
  if (sharding.mesh_ndim() != mesh.ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the placements ", sharding.ToString(), " are for ",
                     sharding.mesh_ndim(), " mesh dims, but the mesh ",
                     mesh.ToString(), " has ", mesh.ndim()));
  }
  if (sharding.tensor_rank() != static_cast<int64_t>(shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the placements ", sharding.ToString(), " are for a tensor of rank ",
        sharding.tensor_rank(), ", but the shape [", absl::StrJoin(shape, ", "),
        "] has rank ", shape.size()));
  }
  for (int64_t size : shape) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative size ", size, " in the shape [",
                       absl::StrJoin(shape, ", "), "]"));
    }
  }
  return DTensorSpec(std::move(mesh), sharding, std::move(shape), dtype);
}

absl::StatusOr<ShardBlock> DTensorSpec::BlockAt(
    absl::Span<const int64_t> coord) const {
  return ShardBlockAt(sharding_, mesh_.shape(), shape_, coord);
}

absl::StatusOr<ShardBlock> DTensorSpec::BlockOf(int64_t rank) const {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord, mesh_.CoordinateOf(rank));
  return BlockAt(coord);
}

absl::StatusOr<int64_t> DTensorSpec::ReplicaIndexOf(int64_t rank) const {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord, mesh_.CoordinateOf(rank));
  return ReplicaIndexAt(sharding_, mesh_.shape(), coord);
}

absl::StatusOr<std::vector<int64_t>> DTensorSpec::ReplicaGroupOf(
    int64_t rank) const {
  DT_RETURN_IF_ERROR(mesh_.CoordinateOf(rank).status());
  const std::vector<int64_t> replica_dims = sharding_.ReplicaMeshDims();
  if (replica_dims.empty()) return std::vector<int64_t>{rank};
  // GroupOf orders the group row-major over `replica_dims`, which is the
  // replica index order.
  return mesh_.GroupOf(rank, replica_dims);
}

std::string DTensorSpec::ToString() const {
  return absl::StrCat("DTensorSpec(mesh=", mesh_.ToString(),
                      ", placements=", sharding_.ToString(), ", shape=[",
                      absl::StrJoin(shape_, ", "),
                      "], dtype=", std::string(DTypeName(dtype_)), ")");
}

std::ostream& operator<<(std::ostream& os, const DTensorSpec& spec) {
  return os << spec.ToString();
}

}  // namespace dtensor
