#ifndef DTENSOR_DTENSOR_SHARDING_H_
#define DTENSOR_DTENSOR_SHARDING_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/placement.h"

namespace dtensor {

// The nesting order of the shards of a tensor: entry d lists the mesh dims
// that shard tensor dim d, outermost first (the first one chunks the full
// extent, the next chunks that chunk, ...). Empty as a whole means the default
// order: for every tensor dim, ascending mesh dims (left to right).
using ShardOrder = std::vector<std::vector<int64_t>>;

// A short list of mesh dims (no heap allocation up to 4).
using MeshDimList = absl::InlinedVector<int64_t, 4>;

// The canonical form of how a tensor of a given rank is laid out over the dims
// of a mesh: one normalised placement per mesh dim plus, for every mesh dim
// that shards a tensor dim, its nesting position among the mesh dims sharding
// that tensor dim (0 = outermost). Equivalently: per tensor dim the ordered
// list of mesh dims that split it, and the partial mesh dims with their op.
//
// Every spelling of the same sharding ("S(-2)" vs "S(0)", "P" vs "P(sum)", an
// explicit default order vs none) gives the same value, so Shardings compare
// and hash equal exactly when the shardings are equal. Small (no heap storage
// up to 4 mesh dims) and cheap to copy: it is meant as the state of planners.
// The mesh itself (sizes, ranks) is not part of it; see DTensorSpec.
class Sharding {
 public:
  // No mesh dims, for a 0-d tensor.
  Sharding() = default;

  // From one placement per mesh dim. Shard dims may be negative (counted from
  // the end of a tensor of rank `tensor_rank`). `order` is empty for the
  // default order, else has one entry per tensor dim listing exactly the mesh
  // dims that shard it.
  // Errors: InvalidArgument naming the bad placement, dim or order entry.
  static absl::StatusOr<Sharding> FromPlacements(
      absl::Span<const Placement> placements, int64_t tensor_rank,
      const ShardOrder& order = {});

  // Parses a comma-separated list with one placement per mesh dim ("R",
  // "S(d)", "P", "P(op)"); a shard may carry an explicit nesting position,
  // "S(0)[1]" (this mesh dim is the second to split tensor dim 0). Per tensor
  // dim, either every mesh dim sharding it has a position or none has (default
  // order), and the positions must form 0..m-1.
  // Errors: InvalidArgument naming the bad item.
  static absl::StatusOr<Sharding> Parse(std::string_view text,
                                        int64_t tensor_rank);

  int64_t mesh_ndim() const { return static_cast<int64_t>(entries_.size()); }
  int64_t tensor_rank() const { return tensor_rank_; }

  // The normalised placement of `mesh_dim` (0 <= mesh_dim < mesh_ndim()).
  const Placement& placement(int64_t mesh_dim) const {
    return entries_[mesh_dim].placement;
  }
  std::vector<Placement> placements() const;
  // Position of `mesh_dim` among the mesh dims sharding its tensor dim
  // (0 = outermost); 0 for a mesh dim that shards nothing.
  int64_t nesting_position(int64_t mesh_dim) const {
    return entries_[mesh_dim].position;
  }

  // The mesh dims that shard `tensor_dim`, outermost first.
  MeshDimList MeshDimsSharding(int64_t tensor_dim) const;
  // The full nesting order, one entry per tensor dim (never empty as a whole
  // when tensor_rank() > 0).
  ShardOrder shard_order() const;
  // Whether the mesh dims sharding `tensor_dim` nest left to right.
  bool HasDefaultOrder(int64_t tensor_dim) const;
  // The mesh dims that shard no tensor dim (Replicate or Partial), ascending:
  // ranks that differ only along them hold the same block of the tensor.
  std::vector<int64_t> ReplicaMeshDims() const;

  // ---- Edits, the moves of a redistribution planner. Each returns the new
  // sharding in canonical form.
  // Requires: valid dtensor/mesh/tensor dims (the caller's contract, checked by
  // DT_DCHECK only: this is the planner's hot path). ----

  // `mesh_dims` become Replicate; the mesh dims still sharding each tensor dim
  // keep their relative nesting order.
  Sharding WithReplicated(absl::Span<const int64_t> mesh_dims) const;
  // Every Partial mesh dim made Replicate: the sharding of a gradient of a
  // tensor laid out by this (the gradient of a sum of terms is the same for
  // every term).
  Sharding WithoutPartials() const;
  // `mesh_dims`, in the order given, become the innermost shards of
  // `tensor_dim`.
  // Requires: none of `mesh_dims` shards `tensor_dim` already.
  Sharding WithShardsAppended(absl::Span<const int64_t> mesh_dims,
                              int64_t tensor_dim) const;
  // `mesh_dim` becomes Partial(op).
  Sharding WithPartial(int64_t mesh_dim, ReduceOp op) const;

  // Canonical text, accepted by Parse: placements joined by ",", with the
  // "[k]" positions written only for tensor dims whose order is not the
  // default. E.g. "S(0),S(0)", "S(0)[1],S(0)[0],P(max)".
  std::string ToString() const;

  friend bool operator==(const Sharding& a, const Sharding& b) {
    return a.tensor_rank_ == b.tensor_rank_ && a.entries_ == b.entries_;
  }
  friend bool operator!=(const Sharding& a, const Sharding& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const Sharding& s) {
    return H::combine(std::move(h), s.tensor_rank_, s.entries_);
  }

 private:
  struct Entry {
    Placement placement;
    int32_t position = 0;

    friend bool operator==(const Entry& a, const Entry& b) {
      return a.placement == b.placement && a.position == b.position;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Entry& e) {
      return H::combine(std::move(h), e.placement, e.position);
    }
  };

  // Renumbers the positions of the mesh dims sharding each tensor dim to
  // 0..m-1, keeping their relative order.
  void CompactPositions();

  // `placements` normalised; `positions` per mesh dim, -1 where not given.
  static absl::StatusOr<Sharding> Build(std::vector<Placement> placements,
                                        int64_t tensor_rank,
                                        std::vector<int64_t> positions);

  absl::InlinedVector<Entry, 4> entries_;
  int64_t tensor_rank_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Sharding& sharding);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_SHARDING_H_
