#include "dtensor/shard_geometry.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace {

// Checks that `coord` is a valid coordinate of a mesh of `mesh_shape` with
// the sharding's number of dims.
absl::Status ValidateCoordinate(const Sharding& sharding,
                                absl::Span<const int64_t> mesh_shape,
                                absl::Span<const int64_t> coord) {
  if (static_cast<int64_t>(mesh_shape.size()) != sharding.mesh_ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh shape [", absl::StrJoin(mesh_shape, ", "), "] has ",
                     mesh_shape.size(), " dims but the sharding ",
                     sharding.ToString(), " has ", sharding.mesh_ndim()));
  }
  for (int64_t size : mesh_shape) {
    if (size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh shape [", absl::StrJoin(mesh_shape, ", "),
                       "] has a size ", size, " < 1"));
    }
  }
  bool in_range = coord.size() == mesh_shape.size();
  for (size_t m = 0; in_range && m < coord.size(); ++m) {
    in_range = coord[m] >= 0 && coord[m] < mesh_shape[m];
  }
  if (!in_range) {
    return absl::OutOfRangeError(
        absl::StrCat("mesh coordinate [", absl::StrJoin(coord, ", "),
                     "] is out of range for mesh shape [",
                     absl::StrJoin(mesh_shape, ", "), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

ChunkRange ChunkOf(int64_t extent, int64_t num_chunks, int64_t index) {
  DT_DCHECK(extent >= 0 && num_chunks >= 1);
  DT_DCHECK(index >= 0 && index < num_chunks);
  // Written so that no intermediate exceeds `extent`: shapes may be huge.
  const int64_t chunk = extent / num_chunks + (extent % num_chunks != 0);
  const int64_t begin =
      chunk == 0 || index > extent / chunk ? extent : index * chunk;
  return ChunkRange{begin, std::min(chunk, extent - begin)};
}

std::ostream& operator<<(std::ostream& os, const ChunkRange& range) {
  return os << "[" << range.offset << ", " << range.offset + range.size << ")";
}

std::ostream& operator<<(std::ostream& os, const ShardBlock& block) {
  return os << "shape [" << absl::StrJoin(block.shape, ", ") << "] at ["
            << absl::StrJoin(block.offset, ", ") << "]";
}

bool ShardBlock::empty() const {
  for (int64_t size : shape) {
    if (size == 0) return true;
  }
  return false;
}

int64_t ShardBlock::numel() const {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return n;
}

absl::StatusOr<ShardBlock> ShardBlockAt(const Sharding& sharding,
                                        absl::Span<const int64_t> mesh_shape,
                                        absl::Span<const int64_t> global_shape,
                                        absl::Span<const int64_t> coord) {
  DT_RETURN_IF_ERROR(ValidateCoordinate(sharding, mesh_shape, coord));
  const int64_t rank = sharding.tensor_rank();
  bool valid_shape = static_cast<int64_t>(global_shape.size()) == rank;
  for (int64_t size : global_shape) valid_shape = valid_shape && size >= 0;
  if (!valid_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("global shape [", absl::StrJoin(global_shape, ", "),
                     "] is not a valid shape of rank ", rank,
                     " for the sharding ", sharding.ToString()));
  }
  ShardBlock block;
  block.shape.assign(global_shape.begin(), global_shape.end());
  block.offset.assign(rank, 0);
  for (int64_t d = 0; d < rank; ++d) {
    for (int64_t m : sharding.MeshDimsSharding(d)) {
      const ChunkRange chunk = ChunkOf(block.shape[d], mesh_shape[m], coord[m]);
      block.offset[d] += chunk.offset;
      block.shape[d] = chunk.size;
    }
  }
  return block;
}

absl::StatusOr<int64_t> ReplicaIndexAt(const Sharding& sharding,
                                       absl::Span<const int64_t> mesh_shape,
                                       absl::Span<const int64_t> coord) {
  DT_RETURN_IF_ERROR(ValidateCoordinate(sharding, mesh_shape, coord));
  int64_t index = 0;
  for (int64_t m : sharding.ReplicaMeshDims()) {
    index = index * mesh_shape[m] + coord[m];
  }
  return index;
}

absl::StatusOr<InnermostRowSplit> InnermostRowSplitAt(
    const Sharding& sharding, absl::Span<const int64_t> mesh_shape,
    absl::Span<const int64_t> global_shape, absl::Span<const int64_t> coord,
    int64_t mesh_dim) {
  if (sharding.tensor_rank() == 0 || mesh_dim < 0 ||
      mesh_dim >= sharding.mesh_ndim() ||
      sharding.MeshDimsSharding(0).empty() ||
      sharding.MeshDimsSharding(0).back() != mesh_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        sharding.ToString(), " does not split dim 0 over mesh dim ", mesh_dim,
        " innermost"));
  }
  InnermostRowSplit split;
  DT_ASSIGN_OR_RETURN(
      split.whole, ShardBlockAt(sharding.WithReplicated({mesh_dim}), mesh_shape,
                                global_shape, coord));
  split.rows = RowChunks{split.whole.shape[0], mesh_shape[mesh_dim]};
  return split;
}

std::vector<ChunkRange> RowChunks::All() const {
  std::vector<ChunkRange> rows;
  rows.reserve(parts);
  for (int64_t r = 0; r < parts; ++r) rows.push_back(of(r));
  return rows;
}

}  // namespace dtensor
