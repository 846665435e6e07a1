#ifndef DTENSOR_DTENSOR_SHARD_GEOMETRY_H_
#define DTENSOR_DTENSOR_SHARD_GEOMETRY_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/sharding.h"

namespace dtensor {

// A contiguous range [offset, offset + size) of one tensor dim.
struct ChunkRange {
  int64_t offset = 0;
  int64_t size = 0;

  friend bool operator==(const ChunkRange& a, const ChunkRange& b) {
    return a.offset == b.offset && a.size == b.size;
  }
};

// "[offset, offset + size)".
std::ostream& operator<<(std::ostream& os, const ChunkRange& range);

// The range of [0, extent) that chunk `index` of `num_chunks` owns under the
// torch.chunk rule: chunk = ceil(extent / num_chunks); chunk i owns
// [i*chunk, min((i+1)*chunk, extent)); trailing chunks may be empty, with the
// offset clamped to `extent`. E.g. extent 5 in 4 chunks: sizes 2,2,1,0 at
// offsets 0,2,4,5.
// Requires: extent >= 0, num_chunks >= 1, 0 <= index < num_chunks.
ChunkRange ChunkOf(int64_t extent, int64_t num_chunks, int64_t index);

// The box of the global tensor that one rank holds: `shape` elements starting
// at global index `offset`, per tensor dim. Sizes may be zero.
struct ShardBlock {
  std::vector<int64_t> shape;
  std::vector<int64_t> offset;

  // Whether it has no elements (some size is zero).
  bool empty() const;
  // The number of elements.
  int64_t numel() const;
  friend bool operator==(const ShardBlock& a, const ShardBlock& b) {
    return a.shape == b.shape && a.offset == b.offset;
  }
  friend bool operator!=(const ShardBlock& a, const ShardBlock& b) {
    return !(a == b);
  }
};

// "shape [3, 2] at [5, 0]".
std::ostream& operator<<(std::ostream& os, const ShardBlock& block);

// The block held by the rank at mesh coordinate `coord` of a mesh of
// `mesh_shape`, for a tensor of `global_shape` laid out by `sharding`: every
// tensor dim is chunked by the mesh dims sharding it, outermost first, each
// chunking the range the previous one left.
// Errors: InvalidArgument naming the value: a mesh shape or coordinate whose
// length is not sharding.mesh_ndim(), a mesh size < 1, a coordinate out of
// range, a global shape whose length is not sharding.tensor_rank(), a
// negative size.
absl::StatusOr<ShardBlock> ShardBlockAt(const Sharding& sharding,
                                        absl::Span<const int64_t> mesh_shape,
                                        absl::Span<const int64_t> global_shape,
                                        absl::Span<const int64_t> coord);

// FSDP's sharding, where `mesh_dim` is the innermost split of tensor dim 0:
// the block of sharding.WithReplicated({mesh_dim}) held at `coord` (`whole`)
// and, per coordinate along `mesh_dim`, the rows of `whole` the rank there
// holds (offsets relative to whole's first row): contiguous chunks that
// cover it in order. Errors: a sharding where mesh_dim is not the innermost
// mesh dim sharding dim 0 (decided from the sharding alone, so every rank
// answers alike), ShardBlockAt's.
// The rows of a block of `extent` rows that each of `parts` ranks holds
// (ChunkOf), in closed form: a split over many ranks is not materialised
// unless a collective needs every rank's rows.
struct RowChunks {
  int64_t extent = 0;
  int64_t parts = 1;

  // The rows of the rank at `index` (0 <= index < parts).
  ChunkRange of(int64_t index) const { return ChunkOf(extent, parts, index); }
  // Every rank's rows, in order (O(parts)).
  std::vector<ChunkRange> All() const;
};
struct InnermostRowSplit {
  ShardBlock whole;
  RowChunks rows;
};
absl::StatusOr<InnermostRowSplit> InnermostRowSplitAt(
    const Sharding& sharding, absl::Span<const int64_t> mesh_shape,
    absl::Span<const int64_t> global_shape, absl::Span<const int64_t> coord,
    int64_t mesh_dim);

// Which replica of its block the rank at `coord` holds: its row-major index
// over its coordinates on sharding.ReplicaMeshDims() (the mesh dims along
// which ranks hold the same block), so exactly one rank per block has index 0.
// Errors as for ShardBlockAt.
absl::StatusOr<int64_t> ReplicaIndexAt(const Sharding& sharding,
                                       absl::Span<const int64_t> mesh_shape,
                                       absl::Span<const int64_t> coord);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_SHARD_GEOMETRY_H_
