// The planner's permute classes: whether a permute between two shardings of a
// class can deliver every block, decided in closed form, against the blocks
// every rank holds (ShardBlockAt at every mesh coordinate), on random small
// meshes (with sizes of 1), shapes and shardings.
#include "dtensor/redistribute/planner_permute_classes.h"

#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// The non-empty blocks (offset, shape) the ranks of the whole mesh hold.
std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> HeldBlocks(
    const Sharding& sharding, const std::vector<int64_t>& mesh_shape,
    const std::vector<int64_t>& global_shape) {
  std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> blocks;
  std::vector<int64_t> coord(mesh_shape.size(), 0);
  while (true) {
    const ShardBlock block =
        ShardBlockAt(sharding, mesh_shape, global_shape, coord).value();
    if (!block.empty()) blocks.insert({block.offset, block.shape});
    size_t m = 0;
    for (; m < coord.size(); ++m) {
      if (++coord[m] < mesh_shape[m]) break;
      coord[m] = 0;
    }
    if (m == coord.size()) return blocks;
  }
}

// A random sharding: each mesh dim Replicate, Partial or a Shard of a random
// tensor dim, in a random nesting order.
Sharding RandomSharding(std::mt19937& rng, int64_t mesh_ndim,
                        int64_t tensor_rank) {
  std::uniform_int_distribution<int64_t> kind(0, tensor_rank + 1);
  std::vector<Placement> placements;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const int64_t k = kind(rng);
    placements.push_back(k == 0   ? Placement::Replicate()
                         : k == 1 ? Placement::Partial()
                                  : Placement::Shard(k - 2));
  }
  ShardOrder order(tensor_rank);
  std::vector<int64_t> mesh_dims(mesh_ndim);
  for (int64_t m = 0; m < mesh_ndim; ++m) mesh_dims[m] = m;
  std::shuffle(mesh_dims.begin(), mesh_dims.end(), rng);
  for (int64_t m : mesh_dims) {
    if (placements[m].is_shard()) order[placements[m].dim()].push_back(m);
  }
  return Sharding::FromPlacements(placements, tensor_rank, order).value();
}

TEST(PermuteClassesTest, HoldsSameBlocksMatchesEveryRanksBlocks) {
  std::mt19937 rng(28);
  std::uniform_int_distribution<int64_t> mesh_size(1, 5);
  // Extents of at least 1: a tensor with an empty dim has no blocks at all,
  // where the per-dim decision still compares the other dims' splits (a
  // conservative "no" the planner never relies on).
  std::uniform_int_distribution<int64_t> extent(1, 23);
  std::uniform_int_distribution<int64_t> ndim(1, 3);
  int checked = 0, held = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    std::vector<int64_t> mesh_shape(ndim(rng));
    for (int64_t& size : mesh_shape) size = mesh_size(rng);
    std::vector<int64_t> global_shape(ndim(rng) == 3 ? 2 : 1);
    for (int64_t& size : global_shape) size = extent(rng);
    const int64_t mesh_ndim = static_cast<int64_t>(mesh_shape.size());
    const int64_t tensor_rank = static_cast<int64_t>(global_shape.size());
    const Sharding from = RandomSharding(rng, mesh_ndim, tensor_rank);
    const PackedSharding packed = PackedSharding::Pack(from);
    const ShardOrders orders(packed, mesh_ndim, tensor_rank);
    PermuteClasses classes(mesh_shape, global_shape);
    const auto from_blocks = HeldBlocks(from, mesh_shape, global_shape);
    for (PackedSharding member : classes.Of(packed, orders).states) {
      const Sharding to = member.Unpack(mesh_ndim, tensor_rank);
      const auto to_blocks = HeldBlocks(to, mesh_shape, global_shape);
      bool includes = true;
      for (const auto& block : to_blocks) includes &= from_blocks.count(block);
      EXPECT_EQ(classes.HoldsSameBlocks(orders, member), includes)
          << from.ToString() << " -> " << to.ToString() << " on mesh ["
          << absl::StrJoin(mesh_shape, ",") << "], shape ["
          << absl::StrJoin(global_shape, ",") << "]";
      ++checked;
      held += includes;
    }
  }
  // Both answers occur (most members of a class do hold the same blocks).
  EXPECT_GT(held, 100);
  EXPECT_GT(checked - held, 20);
}

}  // namespace
}  // namespace dtensor
