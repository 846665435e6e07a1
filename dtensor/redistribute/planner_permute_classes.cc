#include "dtensor/redistribute/planner_permute_classes.h"

#include <algorithm>

#include "dtensor/redistribute/chunk_tiling.h"

namespace dtensor {
namespace {

// The sizes of `mesh_dims` (outermost first).
absl::InlinedVector<int64_t, 8> SizesOf(absl::Span<const int64_t> mesh_dims,
                                        absl::Span<const int64_t> mesh_shape) {
  absl::InlinedVector<int64_t, 8> sizes;
  for (int64_t m : mesh_dims) sizes.push_back(mesh_shape[m]);
  return sizes;
}

}  // namespace

PermuteClasses::PermuteClasses(absl::Span<const int64_t> mesh_shape,
                               absl::Span<const int64_t> global_shape)
    : shapes_(mesh_shape, global_shape), by_dim_(shapes_.tensor_rank) {}

bool PermuteClasses::HoldsSameBlocks(const ShardOrders& from_orders,
                                     PackedSharding to) const {
  // Both shardings split every tensor dim into as many blocks, with disjoint
  // mesh dims per tensor dim, so every combination of per-dim blocks is held
  // by equally many ranks at every Partial coordinate. A permute can deliver
  // every non-empty block `to` needs when, per tensor dim, its non-empty
  // ranges are among those of `from`: as both tile the dim, when they are
  // the same ranges.
  const ShardOrders to_orders(to, shapes_.mesh_ndim, shapes_.tensor_rank);
  for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
    const int64_t parts = GroupSize(to_orders.of(d), shapes_.mesh_shape);
    if (shapes_.global_shape[d] % parts == 0) continue;  // Same equal blocks.
    if (!SameNonEmptyChunks(shapes_.global_shape[d],
                            SizesOf(to_orders.of(d), shapes_.mesh_shape),
                            SizesOf(from_orders.of(d), shapes_.mesh_shape))) {
      return false;
    }
  }
  return true;
}

void PermuteClasses::AddOrders(std::vector<MeshDimList>& by_dim, int64_t d,
                               PackedSharding packed,
                               std::vector<PackedSharding>* members) {
  if (d == static_cast<int64_t>(by_dim.size())) {
    members->push_back(packed);
    return;
  }
  // Ascending, so the loop visits every order and leaves it ascending.
  MeshDimList& dims = by_dim[d];
  do {
    AddOrders(by_dim, d + 1, packed.WithShardsAppended(dims, d, 0), members);
  } while (std::next_permutation(dims.begin(), dims.end()));
}

void PermuteClasses::AddAssignments(const MeshDimList& free_dims, size_t j,
                                    absl::Span<int64_t> assignment,
                                    absl::Span<int64_t> parts_left,
                                    PackedSharding partials,
                                    std::vector<PackedSharding>* members) {
  // The mesh dims left must still be able to make the blocks left.
  int64_t blocks_left = 1;
  for (int64_t parts : parts_left) blocks_left *= parts;
  int64_t capacity = 1;
  for (size_t i = 0; i < j; ++i) capacity *= shapes_.mesh_shape[free_dims[i]];
  if (blocks_left > capacity) return;
  if (j == 0) {
    std::vector<MeshDimList>& by_dim = by_dim_;
    for (MeshDimList& dims : by_dim) dims.clear();
    for (size_t i = 0; i < free_dims.size(); ++i) {
      if (assignment[i] >= 0) by_dim[assignment[i]].push_back(free_dims[i]);
    }
    AddOrders(by_dim, 0, partials, members);
    return;
  }
  // A mesh dim may split a tensor dim only if its size divides the blocks
  // still to make there (the product must come out exact).
  const int64_t size = shapes_.mesh_shape[free_dims[j - 1]];
  assignment[j - 1] = -1;
  AddAssignments(free_dims, j - 1, assignment, parts_left, partials, members);
  for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
    if (parts_left[d] % size != 0) continue;
    assignment[j - 1] = d;
    parts_left[d] /= size;
    AddAssignments(free_dims, j - 1, assignment, parts_left, partials, members);
    parts_left[d] *= size;
  }
}

PermuteClass& PermuteClasses::Of(PackedSharding state,
                                 const ShardOrders& orders) {
  // The key: the Partial mesh dims with their ops, then the number of blocks
  // of every tensor dim.
  PackedSharding partials = state;
  for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
    if (!state.is_partial(m)) {
      partials = partials.WithCode(m, PackedSharding::kReplicateCode);
    }
  }
  absl::InlinedVector<int64_t, 8> key = {static_cast<int64_t>(partials.bits())};
  for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
    key.push_back(GroupSize(orders.of(d), shapes_.mesh_shape));
  }
  auto [it, inserted] = classes_.try_emplace(key);
  PermuteClass& members = it->second;
  if (!inserted) return members;
  members.states.reserve(16);
  absl::InlinedVector<int64_t, 8> parts_left(key.begin() + 1, key.end());
  for (int64_t d = 0; d < shapes_.tensor_rank; ++d) {
    if (shapes_.global_shape[d] % parts_left[d] != 0) members.uneven = true;
  }
  // Every assignment of the non-Partial mesh dims to a tensor dim or to
  // Replicate (-1) that splits each tensor dim into as many blocks as
  // `state`, in every nesting order.
  MeshDimList free_dims;
  for (int64_t m = 0; m < shapes_.mesh_ndim; ++m) {
    if (!state.is_partial(m)) free_dims.push_back(m);
  }
  MeshDimList assignment(free_dims.size());
  AddAssignments(free_dims, free_dims.size(), absl::MakeSpan(assignment),
                 absl::MakeSpan(parts_left), partials, &members.states);
  return members;
}

}  // namespace dtensor
