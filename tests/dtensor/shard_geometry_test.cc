#include "dtensor/shard_geometry.h"

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(ChunkOfTest, FollowsTorchChunk) {
  struct Case {
    int64_t extent, chunks;
    std::vector<int64_t> sizes, offsets;
  };
  const Case cases[] = {
      {5, 4, {2, 2, 1, 0}, {0, 2, 4, 5}},
      {13, 4, {4, 4, 4, 1}, {0, 4, 8, 12}},
      {2, 4, {1, 1, 0, 0}, {0, 1, 2, 2}},
      {0, 3, {0, 0, 0}, {0, 0, 0}},
      {18, 4, {5, 5, 5, 3}, {0, 5, 10, 15}},
      {7, 1, {7}, {0}},
      {6, 4, {2, 2, 2, 0}, {0, 2, 4, 6}},
  };
  for (const Case& c : cases) {
    for (int64_t i = 0; i < c.chunks; ++i) {
      EXPECT_EQ(ChunkOf(c.extent, c.chunks, i),
                (ChunkRange{c.offsets[i], c.sizes[i]}))
          << c.extent << " in " << c.chunks << " chunks, chunk " << i;
    }
  }
}

// Extents near the int64 limit: the chunks still tile [0, extent) exactly.
TEST(ChunkOfTest, HugeExtentsDoNotOverflow) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (int64_t extent : {max, max - 1, max / 2 + 1}) {
    for (int64_t chunks : {2, 3, 7, 1000}) {
      int64_t next = 0;
      for (int64_t i = 0; i < chunks; ++i) {
        const ChunkRange range = ChunkOf(extent, chunks, i);
        ASSERT_EQ(range.offset, next) << extent << " / " << chunks << " #" << i;
        ASSERT_GE(range.size, 0);
        ASSERT_LE(range.size, extent - next);
        next += range.size;
      }
      EXPECT_EQ(next, extent);
    }
  }
}

ShardBlock BlockAt(const std::string& placements,
                   const std::vector<int64_t>& mesh_shape,
                   const std::vector<int64_t>& global_shape,
                   const std::vector<int64_t>& coord) {
  absl::StatusOr<Sharding> sharding =
      Sharding::Parse(placements, global_shape.size());
  EXPECT_TRUE(sharding.ok()) << sharding.status();
  absl::StatusOr<ShardBlock> block =
      ShardBlockAt(*sharding, mesh_shape, global_shape, coord);
  EXPECT_TRUE(block.ok()) << block.status();
  return block.ok() ? *block : ShardBlock();
}

// The issue's example: 18 rows on a (4, 2) mesh with [S(0), S(0)].
TEST(ShardBlockAtTest, EighteenRowsOnFourByTwoDefaultOrder) {
  for (int64_t dp = 0; dp < 4; ++dp) {
    const int64_t tp0_rows = dp < 3 ? 3 : 2;
    const int64_t tp1_rows = dp < 3 ? 2 : 1;
    EXPECT_EQ(BlockAt("S(0),S(0)", {4, 2}, {18, 2}, {dp, 0}),
              (ShardBlock{{tp0_rows, 2}, {5 * dp, 0}}))
        << "dp=" << dp;
    EXPECT_EQ(BlockAt("S(0),S(0)", {4, 2}, {18, 2}, {dp, 1}),
              (ShardBlock{{tp1_rows, 2}, {5 * dp + tp0_rows, 0}}))
        << "dp=" << dp;
  }
}

// Mesh dim 1 outermost: it chunks 18 into 9, 9; mesh dim 0 chunks each 9
// into 3, 3, 3, 0 (the last one empty at the end of its half).
TEST(ShardBlockAtTest, EighteenRowsOnFourByTwoSwappedOrder) {
  for (int64_t dp = 0; dp < 4; ++dp) {
    for (int64_t tp = 0; tp < 2; ++tp) {
      const ShardBlock expected = dp < 3
                                      ? ShardBlock{{3, 2}, {9 * tp + 3 * dp, 0}}
                                      : ShardBlock{{0, 2}, {9 * tp + 9, 0}};
      EXPECT_EQ(BlockAt("S(0)[1],S(0)[0]", {4, 2}, {18, 2}, {dp, tp}), expected)
          << "dp=" << dp << " tp=" << tp;
    }
  }
}

TEST(ShardBlockAtTest, TwoTensorDimsAndReplicas) {
  // Mesh dim 0 shards columns, mesh dim 1 replicates, mesh dim 2 shards rows.
  EXPECT_EQ(BlockAt("S(1),R,S(0)", {2, 3, 3}, {7, 5}, {1, 2, 2}),
            (ShardBlock{{1, 2}, {6, 3}}));
  EXPECT_EQ(BlockAt("S(1),P(max),S(0)", {2, 3, 3}, {7, 5}, {0, 1, 1}),
            (ShardBlock{{3, 3}, {3, 0}}));
}

TEST(ShardBlockAtTest, ErrorsNameTheBadValue) {
  const Sharding sharding = *Sharding::Parse("S(0),R", 1);
  auto message = [&](std::vector<int64_t> mesh, std::vector<int64_t> shape,
                     std::vector<int64_t> coord) {
    absl::StatusOr<ShardBlock> block =
        ShardBlockAt(sharding, mesh, shape, coord);
    return block.ok() ? std::string() : std::string(block.status().message());
  };
  EXPECT_NE(message({4}, {8}, {0}).find("[4]"), std::string::npos);
  EXPECT_NE(message({4, 0}, {8}, {0, 0}).find("size 0"), std::string::npos);
  EXPECT_NE(message({4, 2}, {8}, {4, 0}).find("[4, 0]"), std::string::npos);
  EXPECT_NE(message({4, 2}, {8}, {0}).find("[0]"), std::string::npos);
  EXPECT_NE(message({4, 2}, {8}, {0, -1}).find("[0, -1]"), std::string::npos);
  EXPECT_NE(message({4, 2}, {8, 2}, {0, 0}).find("[8, 2]"), std::string::npos);
  EXPECT_NE(message({4, 2}, {-1}, {0, 0}).find("[-1]"), std::string::npos);
  EXPECT_TRUE(ReplicaIndexAt(sharding, {4, 2}, {0, 2}).status().code() ==
              absl::StatusCode::kOutOfRange);
}

// A random layout problem, described independently of Sharding: the nesting
// order of every tensor dim is kept here as the generator chose it.
struct Case {
  std::vector<int64_t> mesh_shape;
  std::vector<int64_t> global_shape;
  std::vector<Placement> placements;  // Shard dims possibly negative.
  ShardOrder order;                   // Empty: the default order.
  ShardOrder nesting;                 // The order actually meant, per dim.
};

Case RandomCase(std::mt19937& rng) {
  Case c;
  const int64_t mesh_ndim = 1 + rng() % 4;
  for (int64_t m = 0; m < mesh_ndim; ++m) c.mesh_shape.push_back(1 + rng() % 5);
  const int64_t rank = rng() % 4;
  for (int64_t d = 0; d < rank; ++d) {
    // Mostly small sizes (often below the mesh sizes), sometimes zero.
    c.global_shape.push_back(rng() % 4 == 0 ? rng() % 3 : rng() % 10);
  }
  c.nesting.resize(rank);
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const int kind = rng() % 5;
    if (kind >= 2 && rank > 0) {
      const int64_t dim = static_cast<int64_t>(rng() % (2 * rank)) - rank;
      c.placements.push_back(Placement::Shard(dim));
      c.nesting[dim < 0 ? dim + rank : dim].push_back(m);
    } else if (kind == 1) {
      c.placements.push_back(
          Placement::Partial(static_cast<ReduceOp>(rng() % 4)));
    } else {
      c.placements.push_back(Placement::Replicate());
    }
  }
  if (rng() % 3 != 0) {
    for (auto& mesh_dims : c.nesting) {
      std::shuffle(mesh_dims.begin(), mesh_dims.end(), rng);
    }
    c.order = c.nesting;
  }
  return c;
}

// For every index x of an extent-n dim nested by mesh dims of `sizes`
// (outermost first): the chunk index at each level that owns x, found by
// applying the chunk rule to the range left by the levels above.
std::vector<std::vector<int64_t>> OwnerTuples(
    int64_t n, const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> owners(n);
  for (int64_t x = 0; x < n; ++x) {
    int64_t lo = 0, len = n;
    for (int64_t k : sizes) {
      const int64_t chunk = (len + k - 1) / k;
      const int64_t i = (x - lo) / chunk;
      owners[x].push_back(i);
      lo += i * chunk;
      len = std::min(chunk, len - i * chunk);
    }
  }
  return owners;
}

std::vector<std::vector<int64_t>> AllCoordinates(
    const std::vector<int64_t>& mesh_shape) {
  std::vector<std::vector<int64_t>> coords = {{}};
  for (int64_t size : mesh_shape) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& prefix : coords) {
      for (int64_t i = 0; i < size; ++i) {
        next.push_back(prefix);
        next.back().push_back(i);
      }
    }
    coords = std::move(next);
  }
  return coords;
}

// Property: on random meshes, shapes, placements and nesting orders, every
// rank's block agrees with a brute-force evaluation of the chunk rule, the
// blocks tile the tensor with each element held by exactly the product of
// the non-sharding mesh sizes, and the replica indices of the ranks holding
// one block are 0..g-1.
TEST(ShardBlockAtTest, RandomShardingsMatchBruteForce) {
  std::mt19937 rng(2024);
  for (int iteration = 0; iteration < 2000; ++iteration) {
    const Case c = RandomCase(rng);
    const int64_t rank = c.global_shape.size();
    absl::StatusOr<Sharding> sharding =
        Sharding::FromPlacements(c.placements, rank, c.order);
    ASSERT_TRUE(sharding.ok()) << sharding.status();
    SCOPED_TRACE(sharding->ToString());

    // Per tensor dim, the owner tuple of every index.
    std::vector<std::vector<std::vector<int64_t>>> owners(rank);
    for (int64_t d = 0; d < rank; ++d) {
      std::vector<int64_t> sizes;
      for (int64_t m : c.nesting[d]) sizes.push_back(c.mesh_shape[m]);
      owners[d] = OwnerTuples(c.global_shape[d], sizes);
    }
    int64_t replicas = 1;
    std::vector<bool> shards(c.mesh_shape.size(), false);
    for (const auto& mesh_dims : c.nesting) {
      for (int64_t m : mesh_dims) shards[m] = true;
    }
    for (size_t m = 0; m < shards.size(); ++m) {
      if (!shards[m]) replicas *= c.mesh_shape[m];
    }
    int64_t numel = 1;
    for (int64_t size : c.global_shape) numel *= size;
    std::vector<int64_t> holders(numel, 0);
    // Replica indices seen per block, keyed by the coordinates on the
    // sharding mesh dims.
    std::map<std::vector<int64_t>, std::vector<int64_t>> replica_indices;

    for (const std::vector<int64_t>& coord : AllCoordinates(c.mesh_shape)) {
      absl::StatusOr<ShardBlock> block =
          ShardBlockAt(*sharding, c.mesh_shape, c.global_shape, coord);
      ASSERT_TRUE(block.ok()) << block.status();
      ASSERT_EQ(static_cast<int64_t>(block->shape.size()), rank);
      ASSERT_EQ(static_cast<int64_t>(block->offset.size()), rank);
      for (int64_t d = 0; d < rank; ++d) {
        std::vector<int64_t> mine;
        for (int64_t m : c.nesting[d]) mine.push_back(coord[m]);
        int64_t size = 0, before = 0;
        for (const auto& owner : owners[d]) {
          size += owner == mine;
          before += owner < mine;
        }
        EXPECT_EQ(block->shape[d], size) << "dim " << d;
        EXPECT_EQ(block->offset[d], before) << "dim " << d;
      }
      // Count the holders of every element of the block.
      if (block->numel() > 0) {
        std::vector<int64_t> index = block->offset;
        while (true) {
          int64_t flat = 0;
          for (int64_t d = 0; d < rank; ++d) {
            ASSERT_LT(index[d], c.global_shape[d]);
            flat = flat * c.global_shape[d] + index[d];
          }
          ++holders[flat];
          int64_t d = rank - 1;
          while (d >= 0 && ++index[d] == block->offset[d] + block->shape[d]) {
            index[d] = block->offset[d];
            --d;
          }
          if (d < 0) break;
        }
      }
      absl::StatusOr<int64_t> replica =
          ReplicaIndexAt(*sharding, c.mesh_shape, coord);
      ASSERT_TRUE(replica.ok()) << replica.status();
      std::vector<int64_t> key;
      for (size_t m = 0; m < shards.size(); ++m) {
        if (shards[m]) key.push_back(coord[m]);
      }
      replica_indices[key].push_back(*replica);
    }
    for (int64_t flat = 0; flat < numel; ++flat) {
      ASSERT_EQ(holders[flat], replicas) << "element " << flat;
    }
    for (auto& [key, indices] : replica_indices) {
      std::sort(indices.begin(), indices.end());
      ASSERT_EQ(static_cast<int64_t>(indices.size()), replicas);
      for (int64_t i = 0; i < replicas; ++i) ASSERT_EQ(indices[i], i);
    }
  }
}

// InnermostRowSplitAt's rows, in closed form, against the blocks ShardBlockAt
// gives each coordinate along the split mesh dim: rank r's rows are its
// block's rows, relative to the gathered block, for uneven and empty splits
// too.
TEST(ShardGeometryTest, InnermostRowSplitRowsAreTheRanksBlocks) {
  for (const auto& [mesh_shape, rows] :
       std::vector<std::pair<std::vector<int64_t>, int64_t>>{{{4, 3}, 18},
                                                             {{2, 5}, 7},
                                                             {{3, 4}, 2},
                                                             {{1, 6}, 0},
                                                             {{2, 64}, 100}}) {
    const Sharding sharding = *Sharding::Parse("S(0),S(0)", 2);
    for (int64_t outer = 0; outer < mesh_shape[0]; ++outer) {
      std::vector<int64_t> coord = {outer, 0};
      absl::StatusOr<InnermostRowSplit> split = InnermostRowSplitAt(
          sharding, mesh_shape, {rows, 3}, coord, /*mesh_dim=*/1);
      ASSERT_TRUE(split.ok()) << split.status();
      const std::vector<ChunkRange> all = split->rows.All();
      ASSERT_EQ(static_cast<int64_t>(all.size()), mesh_shape[1]);
      int64_t next = 0;
      for (int64_t r = 0; r < mesh_shape[1]; ++r) {
        coord[1] = r;
        const ShardBlock block =
            *ShardBlockAt(sharding, mesh_shape, {rows, 3}, coord);
        EXPECT_EQ(split->rows.of(r).size, block.shape[0]);
        EXPECT_EQ(all[r], split->rows.of(r));
        if (block.shape[0] > 0) {
          EXPECT_EQ(split->whole.offset[0] + split->rows.of(r).offset,
                    block.offset[0]);
          EXPECT_EQ(split->rows.of(r).offset, next);
        }
        next += block.shape[0];
      }
      EXPECT_EQ(next, split->whole.shape[0]);
    }
  }
}

}  // namespace
}  // namespace dtensor
