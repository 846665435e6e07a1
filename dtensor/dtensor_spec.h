#ifndef DTENSOR_DTENSOR_DTENSOR_SPEC_H_
#define DTENSOR_DTENSOR_DTENSOR_SPEC_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/placement.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {

// The global description of a distributed tensor: the mesh it lives on, its
// sharding over the mesh (placements and nesting order, as a Sharding), its
// global shape and dtype. An immutable value; it answers which block of the
// global tensor each rank holds.
class DTensorSpec {
 public:
  // One placement per mesh dim; Shard dims may be negative (counted from the
  // end of `shape`); `order` as for Sharding::FromPlacements (empty: default,
  // left to right).
  // Errors: InvalidArgument naming the bad value: a placement count other
  //   than mesh.ndim(), a shard dim out of range, an invalid order, a
  //   negative size.
  static absl::StatusOr<DTensorSpec> Create(
      DeviceMesh mesh, absl::Span<const Placement> placements,
      std::vector<int64_t> shape, DType dtype, const ShardOrder& order = {});
  // Errors: a sharding for another number of mesh dims or another tensor
  // rank, a negative size.
  static absl::StatusOr<DTensorSpec> Create(DeviceMesh mesh, Sharding sharding,
                                            std::vector<int64_t> shape,
                                            DType dtype);

  const DeviceMesh& mesh() const { return mesh_; }
  const Sharding& sharding() const { return sharding_; }
  std::vector<Placement> placements() const { return sharding_.placements(); }
  ShardOrder shard_order() const { return sharding_.shard_order(); }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  DType dtype() const { return dtype_; }

  // The block held by the rank at mesh coordinate `coord`; OutOfRange for a
  // coordinate outside the mesh.
  absl::StatusOr<ShardBlock> BlockAt(absl::Span<const int64_t> coord) const;
  // The block held by `rank`; NotFound when the mesh does not contain it.
  absl::StatusOr<ShardBlock> BlockOf(int64_t rank) const;
  // Which replica of its block `rank` holds: 0 for exactly one rank per block
  // (see ReplicaIndexAt). NotFound when the mesh does not contain it.
  absl::StatusOr<int64_t> ReplicaIndexOf(int64_t rank) const;
  // The ranks holding the same block as `rank` (itself included: those that
  // differ from it only along Replicate and Partial mesh dims), ordered by
  // replica index. NotFound when the mesh does not contain `rank`.
  absl::StatusOr<std::vector<int64_t>> ReplicaGroupOf(int64_t rank) const;

  // "DTensorSpec(mesh=<mesh>, placements=S(0),S(0), shape=[18, 2],
  // dtype=f32)".
  std::string ToString() const;

  friend bool operator==(const DTensorSpec& a, const DTensorSpec& b) {
    return a.mesh_ == b.mesh_ && a.sharding_ == b.sharding_ &&
           a.shape_ == b.shape_ && a.dtype_ == b.dtype_;
  }
  friend bool operator!=(const DTensorSpec& a, const DTensorSpec& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const DTensorSpec& spec) {
    return H::combine(std::move(h), spec.mesh_, spec.sharding_, spec.shape_,
                      spec.dtype_);
  }

 private:
  DTensorSpec(DeviceMesh mesh, Sharding sharding, std::vector<int64_t> shape,
              DType dtype)
      : mesh_(std::move(mesh)),
        sharding_(sharding),
        shape_(std::move(shape)),
        dtype_(dtype) {}

  DeviceMesh mesh_;
  Sharding sharding_;
  std::vector<int64_t> shape_;
  DType dtype_;
};

std::ostream& operator<<(std::ostream& os, const DTensorSpec& spec);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_DTENSOR_SPEC_H_
