#ifndef DTENSOR_DTENSOR_PLANNER_PERMUTE_CLASSES_H_
#define DTENSOR_DTENSOR_PLANNER_PERMUTE_CLASSES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "dtensor/redistribute/packed_sharding.h"
#include "dtensor/sharding.h"

namespace dtensor {

// The number of ranks in the group of `mesh_dims` on a mesh of `mesh_shape`.
inline int64_t GroupSize(absl::Span<const int64_t> mesh_dims,
                         absl::Span<const int64_t> mesh_shape) {
  int64_t size = 1;
  for (int64_t m : mesh_dims) size *= mesh_shape[m];
  return size;
}

// The shardings a permute can reach from one another: same Partial mesh dims,
// every tensor dim split into as many blocks.
struct PermuteClass {
  std::vector<PackedSharding> states;
  // Whether some tensor dim's blocks are uneven (so a permute must check that
  // the blocks coincide).
  bool uneven = false;
  // (cost, local bytes) of the members whose permutes were expanded.
  std::vector<std::pair<double, double>> expanded;
};

// The permute classes of the shardings of one tensor on one mesh, each made on
// first use by a pruned search over the assignments of mesh dims to tensor
// dims, and cached.
class PermuteClasses {
 public:
  // Requires: the shapes outlive this object.
  PermuteClasses(absl::Span<const int64_t> mesh_shape,
                 absl::Span<const int64_t> global_shape);

  // The class of `state`, whose shard orders are `orders`.
  PermuteClass& Of(PackedSharding state, const ShardOrders& orders);

  // Whether a permute from a sharding whose shard orders are `from_orders` to
  // `to` (of the same class) can deliver every block `to` needs. In time
  // independent of the number of ranks (SameNonEmptyChunks).
  bool HoldsSameBlocks(const ShardOrders& from_orders, PackedSharding to) const;

 private:
  // Appends the members of a permute class whose free (non-Partial) mesh
  // dims free_dims[i], i >= j, are assigned (to tensor dim `assignment[i]`,
  // or -1 for Replicate), placing the others so that `parts_left[d]` more
  // blocks are made along each tensor dim d. The order is that of a counter
  // over the assignment whose fastest digit is free_dims[0].
  void AddAssignments(const MeshDimList& free_dims, size_t j,
                      absl::Span<int64_t> assignment,
                      absl::Span<int64_t> parts_left, PackedSharding partials,
                      std::vector<PackedSharding>* members);
  // Appends `packed` with the mesh dims `by_dim[e]` sharding tensor dim e,
  // for e >= d, in every nesting order.
  static void AddOrders(std::vector<MeshDimList>& by_dim, int64_t d,
                        PackedSharding packed,
                        std::vector<PackedSharding>* members);

  const PlanShapes shapes_;
  // Keyed by the Partial mesh dims with their ops, then the number of blocks
  // of every tensor dim.
  absl::flat_hash_map<absl::InlinedVector<int64_t, 8>, PermuteClass> classes_;
  // Scratch of AddAssignments: the mesh dims assigned to each tensor dim.
  std::vector<MeshDimList> by_dim_;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_PLANNER_PERMUTE_CLASSES_H_
