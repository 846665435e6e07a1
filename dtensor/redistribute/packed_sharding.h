#ifndef DTENSOR_DTENSOR_PACKED_SHARDING_H_
#define DTENSOR_DTENSOR_PACKED_SHARDING_H_

#include <array>
#include <cstdint>

#include "absl/types/span.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/sharding.h"

namespace dtensor {

// The redistribution planner's state: a canonical Sharding packed
// into one 64-bit word, so that copying, comparing and hashing a state are
// single machine-word operations. Byte m describes mesh dim m:
//   0                          Replicate;
//   1 + op                     Partial(op);
//   (d + 1) * 8 + position     Shard(d), at that nesting position (0 =
//                              outermost) among the mesh dims sharding d.
// Positions are compact (0..k-1 per tensor dim) and unused bytes are 0, so
// equal shardings have equal words. Hence at most kMaxMeshDims mesh dims (a
// position takes 3 bits) and tensor rank at most kMaxTensorRank (a shard code
// must fit in a byte).
class PackedSharding {
 public:
  static constexpr int64_t kMaxMeshDims = 8;
  static constexpr int64_t kMaxTensorRank = 31;

  // Every mesh dim Replicate.
  PackedSharding() = default;

  // Whether shardings of a tensor of `tensor_rank` over `mesh_ndim` mesh dims
  // can be packed.
  static bool Fits(int64_t mesh_ndim, int64_t tensor_rank) {
    return mesh_ndim <= kMaxMeshDims && tensor_rank <= kMaxTensorRank;
  }
  // Requires: Fits(sharding.mesh_ndim(), sharding.tensor_rank()).
  static PackedSharding Pack(const Sharding& sharding);
  // The Sharding of this packed sharding, for a tensor of `tensor_rank` over
  // `mesh_ndim` mesh dims.
  Sharding Unpack(int64_t mesh_ndim, int64_t tensor_rank) const;

  static constexpr uint8_t kReplicateCode = 0;
  static uint8_t PartialCode(ReduceOp op) {
    return static_cast<uint8_t>(1 + static_cast<int>(op));
  }
  static uint8_t ShardCode(int64_t tensor_dim, int64_t position) {
    return static_cast<uint8_t>((tensor_dim + 1) << 3 | position);
  }
  static bool IsShardCode(uint8_t code) { return code >= 8; }
  static bool IsPartialCode(uint8_t code) { return code != 0 && code < 8; }

  uint64_t bits() const { return bits_; }
  uint8_t code(int64_t mesh_dim) const {
    return static_cast<uint8_t>(bits_ >> (8 * mesh_dim));
  }
  bool is_replicate(int64_t mesh_dim) const { return code(mesh_dim) == 0; }
  bool is_partial(int64_t mesh_dim) const {
    return IsPartialCode(code(mesh_dim));
  }
  bool is_shard(int64_t mesh_dim) const { return IsShardCode(code(mesh_dim)); }
  // Valid when is_shard(mesh_dim).
  int64_t shard_dim(int64_t mesh_dim) const {
    return (code(mesh_dim) >> 3) - 1;
  }
  // Valid when is_shard(mesh_dim).
  int64_t position(int64_t mesh_dim) const { return code(mesh_dim) & 7; }
  // Valid when is_partial(mesh_dim).
  ReduceOp reduce_op(int64_t mesh_dim) const {
    return static_cast<ReduceOp>(code(mesh_dim) - 1);
  }

  // This sharding with byte `mesh_dim` set to `code`. The caller keeps the
  // positions compact.
  PackedSharding WithCode(int64_t mesh_dim, uint8_t code) const {
    const int shift = static_cast<int>(8 * mesh_dim);
    return PackedSharding((bits_ & ~(uint64_t{0xff} << shift)) | uint64_t{code}
                                                                     << shift);
  }
  // `mesh_dims` become Replicate. Positions stay compact when they are the
  // innermost shards of their tensor dims, or shard nothing.
  PackedSharding WithReplicated(absl::Span<const int64_t> mesh_dims) const {
    PackedSharding result = *this;
    for (int64_t m : mesh_dims) result = result.WithCode(m, kReplicateCode);
    return result;
  }
  // `mesh_dims`, in the order given, become the innermost shards of
  // `tensor_dim` after the `num_sharding` mesh dims sharding it already.
  PackedSharding WithShardsAppended(absl::Span<const int64_t> mesh_dims,
                                    int64_t tensor_dim,
                                    int64_t num_sharding) const {
    PackedSharding result = *this;
    for (int64_t m : mesh_dims) {
      result = result.WithCode(m, ShardCode(tensor_dim, num_sharding++));
    }
    return result;
  }

  friend bool operator==(PackedSharding a, PackedSharding b) {
    return a.bits_ == b.bits_;
  }
  friend bool operator!=(PackedSharding a, PackedSharding b) {
    return a.bits_ != b.bits_;
  }

 private:
  explicit PackedSharding(uint64_t bits) : bits_(bits) {}

  uint64_t bits_ = 0;
};

// The mesh dims that shard each tensor dim of a PackedSharding, outermost
// first: the sharding decoded once for the moves generated from it.
class ShardOrders {
 public:
  ShardOrders(PackedSharding packed, int64_t mesh_ndim, int64_t tensor_rank);

  absl::Span<const int64_t> of(int64_t tensor_dim) const {
    return absl::MakeConstSpan(dims_[tensor_dim].data(), count_[tensor_dim]);
  }
  int64_t count(int64_t tensor_dim) const { return count_[tensor_dim]; }

 private:
  std::array<std::array<int64_t, PackedSharding::kMaxMeshDims>,
             PackedSharding::kMaxTensorRank>
      dims_;
  std::array<int64_t, PackedSharding::kMaxTensorRank> count_;
};

// The mesh and tensor shapes a redistribution is planned for, with their
// ranks: what the planner's search, moves and permute classes all read.
// Views: the shapes must outlive it.
struct PlanShapes {
  PlanShapes(absl::Span<const int64_t> mesh_shape,
             absl::Span<const int64_t> global_shape)
      : mesh_shape(mesh_shape),
        global_shape(global_shape),
        mesh_ndim(static_cast<int64_t>(mesh_shape.size())),
        tensor_rank(static_cast<int64_t>(global_shape.size())) {}

  absl::Span<const int64_t> mesh_shape;
  absl::Span<const int64_t> global_shape;
  int64_t mesh_ndim;
  int64_t tensor_rank;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_PACKED_SHARDING_H_
