#include "dtensor/dtensor_spec.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "dtensor/mesh/device_mesh.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

DeviceMesh MustMesh(std::vector<int64_t> shape,
                    std::vector<int64_t> ranks = {}) {
  absl::StatusOr<DeviceMesh> mesh =
      DeviceMesh::Create(std::move(shape), {}, std::move(ranks));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

DTensorSpec MustSpec(const DeviceMesh& mesh, const std::string& placements,
                     std::vector<int64_t> shape, DType dtype = DType::kF32) {
  absl::StatusOr<Sharding> sharding = Sharding::Parse(placements, shape.size());
  EXPECT_TRUE(sharding.ok()) << sharding.status();
  absl::StatusOr<DTensorSpec> spec =
      DTensorSpec::Create(mesh, *sharding, std::move(shape), dtype);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::string CreateError(const DeviceMesh& mesh,
                        const std::vector<Placement>& placements,
                        std::vector<int64_t> shape,
                        const ShardOrder& order = {}) {
  absl::StatusOr<DTensorSpec> spec = DTensorSpec::Create(
      mesh, placements, std::move(shape), DType::kF32, order);
  return spec.ok() ? "" : std::string(spec.status().message());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The issue's example by rank id: ranks are row-major over the (4, 2) mesh,
// so rank 2*dp + tp sits at (dp, tp).
TEST(DTensorSpecTest, EighteenRowsOnFourByTwoByRank) {
  const DeviceMesh mesh = MustMesh({4, 2});
  const DTensorSpec spec = MustSpec(mesh, "S(0),S(0)", {18, 2});
  const DTensorSpec swapped = MustSpec(mesh, "S(0)[1],S(0)[0]", {18, 2});
  const int64_t rows[4][2] = {{3, 2}, {3, 2}, {3, 2}, {2, 1}};
  for (int64_t dp = 0; dp < 4; ++dp) {
    for (int64_t tp = 0; tp < 2; ++tp) {
      const int64_t rank = 2 * dp + tp;
      EXPECT_EQ(*spec.BlockOf(rank),
                (ShardBlock{{rows[dp][tp], 2}, {5 * dp + tp * rows[dp][0], 0}}))
          << "rank " << rank;
      const ShardBlock swapped_block =
          dp < 3 ? ShardBlock{{3, 2}, {9 * tp + 3 * dp, 0}}
                 : ShardBlock{{0, 2}, {9 * tp + 9, 0}};
      EXPECT_EQ(*swapped.BlockOf(rank), swapped_block) << "rank " << rank;
      EXPECT_EQ(*spec.ReplicaIndexOf(rank), 0);
      EXPECT_EQ(*spec.ReplicaGroupOf(rank), std::vector<int64_t>{rank});
    }
  }
}

// Rank ids follow the mesh's rank list, not their numeric order.
TEST(DTensorSpecTest, BlocksFollowTheRankList) {
  // Row-major positions: (0,0)->3, (0,1)->1, (1,0)->2, (1,1)->0.
  const DeviceMesh mesh = MustMesh({2, 2}, {3, 1, 2, 0});
  const DTensorSpec spec = MustSpec(mesh, "S(1),R", {4, 6});
  EXPECT_EQ(*spec.BlockOf(3), (ShardBlock{{4, 3}, {0, 0}}));
  EXPECT_EQ(*spec.BlockOf(1), (ShardBlock{{4, 3}, {0, 0}}));
  EXPECT_EQ(*spec.BlockOf(2), (ShardBlock{{4, 3}, {0, 3}}));
  EXPECT_EQ(*spec.BlockOf(0), (ShardBlock{{4, 3}, {0, 3}}));
  EXPECT_EQ(*spec.ReplicaIndexOf(3), 0);
  EXPECT_EQ(*spec.ReplicaIndexOf(1), 1);
  EXPECT_EQ(*spec.ReplicaIndexOf(2), 0);
  EXPECT_EQ(*spec.ReplicaIndexOf(0), 1);
  EXPECT_EQ(*spec.ReplicaGroupOf(0), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(*spec.ReplicaGroupOf(3), (std::vector<int64_t>{3, 1}));
}

// Property: on random meshes (default rank ids, row-major) and layouts, the
// replica group of every rank is exactly the set of ranks whose coordinates
// agree with it on every sharding mesh dim, ordered by replica index, and
// ranks with the same non-empty block are exactly that group.
TEST(DTensorSpecTest, RandomReplicaGroupsMatchBruteForce) {
  std::mt19937 rng(7);
  for (int iteration = 0; iteration < 200; ++iteration) {
    std::vector<int64_t> mesh_shape;
    const int64_t mesh_ndim = 1 + rng() % 4;
    for (int64_t m = 0; m < mesh_ndim; ++m) mesh_shape.push_back(1 + rng() % 4);
    std::vector<int64_t> shape;
    const int64_t rank = 1 + rng() % 3;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(rng() % 9);
    std::vector<Placement> placements;
    std::vector<bool> shards;
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      const int kind = rng() % 3;
      placements.push_back(kind == 0   ? Placement::Replicate()
                           : kind == 1 ? Placement::Partial(ReduceOp::kAvg)
                                       : Placement::Shard(rng() % rank));
      shards.push_back(kind == 2);
    }
    const DeviceMesh mesh = MustMesh(mesh_shape);
    absl::StatusOr<DTensorSpec> spec =
        DTensorSpec::Create(mesh, placements, shape, DType::kBF16);
    ASSERT_TRUE(spec.ok()) << spec.status();
    SCOPED_TRACE(spec->ToString());

    // Row-major coordinates of every rank id.
    const int64_t num_ranks = mesh.size();
    std::vector<std::vector<int64_t>> coords(num_ranks);
    for (int64_t r = 0; r < num_ranks; ++r) {
      int64_t rest = r;
      coords[r].resize(mesh_ndim);
      for (int64_t m = mesh_ndim - 1; m >= 0; --m) {
        coords[r][m] = rest % mesh_shape[m];
        rest /= mesh_shape[m];
      }
    }
    std::vector<ShardBlock> blocks;
    for (int64_t r = 0; r < num_ranks; ++r) {
      absl::StatusOr<ShardBlock> block = spec->BlockOf(r);
      ASSERT_TRUE(block.ok()) << block.status();
      ASSERT_EQ(*block, *spec->BlockAt(coords[r]));
      blocks.push_back(*block);
    }
    for (int64_t r = 0; r < num_ranks; ++r) {
      std::vector<int64_t> expected;
      for (int64_t other = 0; other < num_ranks; ++other) {
        bool same = true;
        for (int64_t m = 0; m < mesh_ndim; ++m) {
          same = same && (!shards[m] || coords[other][m] == coords[r][m]);
        }
        if (same) expected.push_back(other);
      }
      absl::StatusOr<std::vector<int64_t>> group = spec->ReplicaGroupOf(r);
      ASSERT_TRUE(group.ok()) << group.status();
      std::vector<int64_t> sorted = *group;
      std::sort(sorted.begin(), sorted.end());
      ASSERT_EQ(sorted, expected) << "rank " << r;
      for (size_t i = 0; i < group->size(); ++i) {
        ASSERT_EQ(*spec->ReplicaIndexOf((*group)[i]), static_cast<int64_t>(i));
      }
      if (blocks[r].empty()) continue;
      std::vector<int64_t> same_block;
      for (int64_t other = 0; other < num_ranks; ++other) {
        if (blocks[other] == blocks[r]) same_block.push_back(other);
      }
      ASSERT_EQ(same_block, expected) << "rank " << r;
    }
  }
}

TEST(DTensorSpecTest, CreateErrorsNameTheBadValue) {
  const DeviceMesh mesh = MustMesh({4, 2});
  const Placement s0 = Placement::Shard(0);
  const Placement r = Placement::Replicate();
  EXPECT_TRUE(Contains(CreateError(mesh, {s0, r, r}, {8}), "3 placements"));
  EXPECT_TRUE(Contains(CreateError(mesh, {s0}, {8}), "1 placements (S(0))"));
  EXPECT_TRUE(
      Contains(CreateError(mesh, {Placement::Shard(2), r}, {8, 2}), "S(2)"));
  EXPECT_TRUE(
      Contains(CreateError(mesh, {Placement::Shard(-3), r}, {8, 2}), "S(-3)"));
  EXPECT_TRUE(Contains(CreateError(mesh, {s0, r}, {8, -1}), "-1"));
  EXPECT_TRUE(
      Contains(CreateError(mesh, {s0, s0}, {8}, {{0, 0}}), "listed twice"));
  EXPECT_TRUE(Contains(CreateError(mesh, {s0, s0}, {8}, {{1, 3}}), "3"));
  EXPECT_EQ(CreateError(mesh, {s0, s0}, {8}, {{1, 0}}), "");

  const Sharding three_dims = *Sharding::Parse("S(0),R,R", 1);
  absl::StatusOr<DTensorSpec> wrong_mesh =
      DTensorSpec::Create(mesh, three_dims, {8}, DType::kF32);
  ASSERT_FALSE(wrong_mesh.ok());
  EXPECT_TRUE(Contains(std::string(wrong_mesh.status().message()), "S(0),R,R"));
  const Sharding rank_one = *Sharding::Parse("S(0),R", 1);
  absl::StatusOr<DTensorSpec> wrong_rank =
      DTensorSpec::Create(mesh, rank_one, {8, 2}, DType::kF32);
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_TRUE(Contains(std::string(wrong_rank.status().message()), "[8, 2]"));
}

TEST(DTensorSpecTest, QueriesRejectRanksAndCoordinatesOutsideTheMesh) {
  const DTensorSpec spec = MustSpec(MustMesh({4, 2}), "S(0),R", {8});
  EXPECT_EQ(spec.BlockOf(8).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spec.BlockOf(-1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(spec.ReplicaIndexOf(8).ok());
  EXPECT_FALSE(spec.ReplicaGroupOf(8).ok());
  EXPECT_FALSE(MustSpec(MustMesh({2}), "S(0)", {8}).ReplicaGroupOf(5).ok());
  EXPECT_EQ(spec.BlockAt({4, 0}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(spec.BlockAt({0}).ok());
}

TEST(DTensorSpecTest, EqualityHashAndAccessors) {
  const DeviceMesh mesh = MustMesh({4, 2});
  absl::StatusOr<DTensorSpec> from_placements =
      DTensorSpec::Create(mesh, {Placement::Shard(-2), Placement::Shard(0)},
                          {18, 2}, DType::kF32, {{0, 1}, {}});
  ASSERT_TRUE(from_placements.ok()) << from_placements.status();
  const DTensorSpec parsed = MustSpec(mesh, "S(0),S(0)", {18, 2});
  EXPECT_EQ(*from_placements, parsed);
  EXPECT_EQ(absl::Hash<DTensorSpec>()(*from_placements),
            absl::Hash<DTensorSpec>()(parsed));
  EXPECT_NE(parsed, MustSpec(mesh, "S(0)[1],S(0)[0]", {18, 2}));
  EXPECT_NE(parsed, MustSpec(mesh, "S(0),S(0)", {18, 3}));
  EXPECT_NE(parsed, MustSpec(mesh, "S(0),S(0)", {18, 2}, DType::kF64));
  EXPECT_NE(parsed, MustSpec(MustMesh({2, 4}), "S(0),S(0)", {18, 2}));

  EXPECT_EQ(parsed.ndim(), 2);
  EXPECT_EQ(parsed.dtype(), DType::kF32);
  EXPECT_EQ(parsed.shape(), (std::vector<int64_t>{18, 2}));
  EXPECT_EQ(parsed.placements(),
            (std::vector<Placement>{Placement::Shard(0), Placement::Shard(0)}));
  EXPECT_EQ(parsed.shard_order(), (ShardOrder{{0, 1}, {}}));
  EXPECT_EQ(parsed.mesh(), mesh);
  const std::string text =
      MustSpec(mesh, "S(0)[1],S(0)[0]", {18, 2}, DType::kBF16).ToString();
  EXPECT_TRUE(Contains(text, "placements=S(0)[1],S(0)[0]")) << text;
  EXPECT_TRUE(Contains(text, "shape=[18, 2]")) << text;
  EXPECT_TRUE(Contains(text, "dtype=bf16")) << text;
}

}  // namespace
}  // namespace dtensor
