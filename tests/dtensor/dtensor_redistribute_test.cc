// End-to-end redistribution on in-process ranks: every rank's result is
// checked against the block of the full tensor that an independent evaluation
// of the chunk rule (written here) assigns to it.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// A layout drawn at random: per mesh dim R, S(d) or P(op), and a random
// nesting order of the mesh dims sharding each tensor dim.
struct RandomSharding {
  std::vector<Placement> placements;
  ShardOrder order;
  std::string text;
};

RandomSharding DrawSharding(int64_t mesh_ndim, int64_t tensor_rank, ReduceOp op,
                            bool allow_partial, std::mt19937& rng) {
  RandomSharding sharding;
  sharding.order.assign(tensor_rank, {});
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const int kinds = allow_partial ? 3 : 2;
    const int kind = tensor_rank == 0 ? 0 : static_cast<int>(rng() % kinds);
    if (kind == 0 || (kind == 1 && tensor_rank == 0)) {
      sharding.placements.push_back(Placement::Replicate());
    } else if (kind == 1) {
      const int64_t d = rng() % tensor_rank;
      sharding.placements.push_back(Placement::Shard(d));
      sharding.order[d].push_back(m);
    } else {
      sharding.placements.push_back(Placement::Partial(op));
    }
  }
  for (auto& dims : sharding.order) std::shuffle(dims.begin(), dims.end(), rng);
  std::vector<std::string> items;
  for (const Placement& p : sharding.placements) items.push_back(p.ToString());
  sharding.text = absl::StrJoin(items, ",");
  for (size_t d = 0; d < sharding.order.size(); ++d) {
    absl::StrAppend(&sharding.text, " order", d, "=[",
                    absl::StrJoin(sharding.order[d], ","), "]");
  }
  return sharding;
}

// The value of element `flat` of the full tensor: small integers, exact in
// f32 and under every reduction.
float FullValue(int64_t flat, uint64_t seed) {
  return static_cast<float>(
      static_cast<int64_t>((flat * 2654435761u + seed * 97) % 17) - 8);
}

// The range of `extent` owned by chunk `index` of `parts` (torch.chunk),
// written independently of dtensor's geometry.
std::pair<int64_t, int64_t> ChunkRange(int64_t extent, int64_t parts,
                                       int64_t index) {
  const int64_t chunk = (extent + parts - 1) / parts;
  const int64_t begin = std::min(index * chunk, extent);
  const int64_t end = std::min(begin + chunk, extent);
  return {begin, end - begin};
}

// The block (offset, size per tensor dim) of the rank at `coord`.
void ReferenceBlock(const RandomSharding& sharding, const Shape& mesh_shape,
                    const Shape& shape, const std::vector<int64_t>& coord,
                    Shape* offset, Shape* size) {
  offset->assign(shape.size(), 0);
  *size = shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    for (int64_t m : sharding.order[d]) {
      auto [begin, length] = ChunkRange((*size)[d], mesh_shape[m], coord[m]);
      (*offset)[d] += begin;
      (*size)[d] = length;
    }
  }
}

// The elements of the full tensor in the block, row-major.
std::vector<float> BlockValues(const Shape& shape, const Shape& offset,
                               const Shape& size, uint64_t seed) {
  int64_t count = 1;
  for (int64_t s : size) count *= s;
  std::vector<float> values;
  values.reserve(count);
  std::vector<int64_t> index(size.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      flat = flat * shape[d] + offset[d] + index[d];
    }
    values.push_back(FullValue(flat, seed));
    for (int64_t d = static_cast<int64_t>(size.size()) - 1; d >= 0; --d) {
      if (++index[d] < size[d]) break;
      index[d] = 0;
    }
  }
  return values;
}

// This rank's term of a Partial(max or min) layout: the rank whose partial
// coordinates are all zero holds the value, the others values below (max)
// or above (min) it, so the reduction gives the value back.
std::vector<float> MaxMinTerm(std::vector<float> values, ReduceOp op,
                              const std::vector<int64_t>& partial_coord) {
  int64_t linear = 0;
  for (int64_t c : partial_coord) linear = linear * 7 + c;
  if (linear == 0) return values;
  const float bump = static_cast<float>(linear % 5 + 1);
  for (float& v : values) v = op == ReduceOp::kMax ? v - bump : v + bump;
  return values;
}

class RedistributeTest : public ::testing::Test {};

// Runs one random case; returns a description of the first mismatch.
void RunCase(uint64_t seed) {
  std::mt19937 rng(seed);
  const int64_t mesh_ndim = 1 + rng() % 3;
  Shape mesh_shape;
  int64_t world = 1;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    mesh_shape.push_back(1 + rng() % (mesh_ndim == 3 ? 2 : 4));
    world *= mesh_shape.back();
  }
  const int64_t tensor_rank = 1 + rng() % 3;
  Shape shape;
  for (int64_t d = 0; d < tensor_rank; ++d) shape.push_back(rng() % 8);
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  const ReduceOp op = ops[rng() % 3];
  const RandomSharding from =
      DrawSharding(mesh_ndim, tensor_rank, op, true, rng);
  RandomSharding to = DrawSharding(mesh_ndim, tensor_rank, op, true, rng);
  // A Partial target must come from Replicate or the same Partial.
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    if (to.placements[m].is_partial() && !from.placements[m].is_partial() &&
        !from.placements[m].is_replicate()) {
      to = DrawSharding(mesh_ndim, tensor_rank, op, false, rng);
      break;
    }
  }
  const std::string what = absl::StrCat(
      "seed ", seed, ": mesh [", absl::StrJoin(mesh_shape, ","), "] shape [",
      absl::StrJoin(shape, ","), "] ", from.text, "  ->  ", to.text);
  absl::StatusOr<DeviceMesh> mesh = DeviceMesh::Create(mesh_shape);
  ASSERT_TRUE(mesh.ok()) << mesh.status();

  LocalCluster cluster(world);
  absl::Status status = cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                        mesh->CoordinateOf(groups.rank()));
    Shape offset, size;
    ReferenceBlock(from, mesh_shape, shape, coord, &offset, &size);
    std::vector<int64_t> partial_coord;
    int64_t partial_size = 1;
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      if (from.placements[m].is_partial()) {
        partial_coord.push_back(coord[m]);
        partial_size *= mesh_shape[m];
      }
    }
    std::vector<float> values = BlockValues(shape, offset, size, seed);
    if (!partial_coord.empty() && op == ReduceOp::kSum) {
      // Sum terms: every rank but the first holds 1s; the first the rest.
      int64_t linear = 0;
      for (int64_t c : partial_coord) linear += c;
      for (float& v : values) {
        v = linear == 0 ? v - static_cast<float>(partial_size - 1) : 1.0f;
      }
    } else if (!partial_coord.empty()) {
      values = MaxMinTerm(values, op, partial_coord);
    }
    DT_ASSIGN_OR_RETURN(Tensor local, Tensor::FromVector<float>(values, size));
    FromLocalOptions options;
    options.global_shape = shape;
    options.order = from.order;
    DT_ASSIGN_OR_RETURN(
        DTensor x,
        DTensor::FromLocal(runtime, local, *mesh, from.placements, options));
    DT_ASSIGN_OR_RETURN(DTensor y, x.Redistribute(to.placements, to.order));
    // Reduce any Partial target to compare values, then check the block.
    bool partial_target = false;
    for (const Placement& p : to.placements) partial_target |= p.is_partial();
    if (partial_target) {
      DT_ASSIGN_OR_RETURN(Tensor full, y.FullTensor());
      std::vector<float> expected =
          BlockValues(shape, Shape(shape.size(), 0), shape, seed);
      if (full.ToVector<float>().value() != expected) {
        return absl::InternalError("full tensor of a partial target differs");
      }
      return absl::OkStatus();
    }
    ReferenceBlock(to, mesh_shape, shape, coord, &offset, &size);
    if (y.ToLocal().shape() != size) {
      return absl::InternalError(
          absl::StrCat("rank ", groups.rank(), " local shape ",
                       ShapeToString(y.ToLocal().shape()), " expected ",
                       ShapeToString(size)));
    }
    if (y.ToLocal().ToVector<float>().value() !=
        BlockValues(shape, offset, size, seed)) {
      return absl::InternalError(
          absl::StrCat("rank ", groups.rank(), " values differ"));
    }
    // And back: the round trip restores the original shard.
    if (!from.placements.empty()) {
      bool partial_source = false;
      for (const Placement& p : from.placements) {
        partial_source |= p.is_partial();
      }
      if (!partial_source) {
        DT_ASSIGN_OR_RETURN(DTensor back,
                            y.Redistribute(from.placements, from.order));
        if (back.ToLocal().ToVector<float>().value() !=
            local.ToVector<float>().value()) {
          return absl::InternalError(
              absl::StrCat("rank ", groups.rank(), " round trip differs"));
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << what << "\n" << status;
}

TEST_F(RedistributeTest, RandomShardingPairsMatchTheReference) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    RunCase(seed);
    if (HasFailure()) break;
  }
}

// Known plans: one collective each, checked end to end (every rank's shard
// against the block of the full tensor).
struct KnownCase {
  Shape mesh;
  Shape shape;
  std::string from;
  std::string to;
  CommKind kind;
};

class KnownPlanTest : public ::testing::TestWithParam<KnownCase> {};

TEST_P(KnownPlanTest, RunsAsOneCollective) {
  const KnownCase& c = GetParam();
  absl::StatusOr<DeviceMesh> mesh = DeviceMesh::Create(c.mesh);
  ASSERT_TRUE(mesh.ok());
  const int64_t rank = static_cast<int64_t>(c.shape.size());
  absl::StatusOr<Sharding> from = Sharding::Parse(c.from, rank);
  absl::StatusOr<Sharding> to = Sharding::Parse(c.to, rank);
  ASSERT_TRUE(from.ok() && to.ok());
  LocalCluster cluster(mesh->size());
  absl::Status status = cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(
        Tensor full, Tensor::Arange(0, NumElements(c.shape), 1, DType::kF32));
    DT_ASSIGN_OR_RETURN(full, full.View(c.shape));
    DT_ASSIGN_OR_RETURN(
        DTensor x, DTensor::Distribute(runtime, full, *mesh, from->placements(),
                                       from->shard_order()));
    CommCounter counter;
    DTensor y;
    {
      CommCounter::Scope scope(counter);
      DT_ASSIGN_OR_RETURN(y, x.Redistribute(*to));
    }
    if (counter.count(c.kind) != 1 || counter.total_collectives() != 1) {
      return absl::InternalError(
          absl::StrCat("expected one ", CommKindName(c.kind), ", got ",
                       counter.total_collectives(), " collectives"));
    }
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                        mesh->CoordinateOf(groups.rank()));
    RandomSharding sharding;
    sharding.order = to->shard_order();
    Shape offset, size;
    ReferenceBlock(sharding, c.mesh, c.shape, coord, &offset, &size);
    DT_ASSIGN_OR_RETURN(Tensor block, full.Narrow(0, offset[0], size[0]));
    for (int64_t d = 1; d < rank; ++d) {
      DT_ASSIGN_OR_RETURN(block, block.Narrow(d, offset[d], size[d]));
    }
    if (y.ToLocal().ToVector<float>().value() !=
        block.ToVector<float>().value()) {
      return absl::InternalError(
          absl::StrCat("rank ", groups.rank(), " holds a wrong shard"));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << c.from << " -> " << c.to << ": " << status;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KnownPlanTest,
    ::testing::Values(
        // Transposed shards: one permute.
        KnownCase{{2, 2}, {8, 8}, "S(0),S(1)", "S(1),S(0)", CommKind::kPermute},
        // Nesting order swapped: one permute.
        KnownCase{{2, 2},
                  {64, 64},
                  "S(0),S(0)",
                  "S(0)[1],S(0)[0]",
                  CommKind::kPermute},
        // An all-to-all whose moved mesh dims land in the other order.
        KnownCase{{2, 2},
                  {480, 960},
                  "S(0),S(0)",
                  "S(1)[1],S(1)[0]",
                  CommKind::kAllToAll},
        // Uneven: an all-to-all over the flattened group.
        KnownCase{
            {2, 3}, {7, 11}, "S(0),S(0)", "S(1),S(1)", CommKind::kAllToAll},
        // A permute over a sub-group only (mesh dim 0 keeps its role).
        KnownCase{{2, 2, 2},
                  {512, 512},
                  "R,S(0),S(1)",
                  "R,S(1),S(0)",
                  CommKind::kPermute},
        // Both shards gathered by one all-gather over 4 ranks.
        KnownCase{{2, 2}, {9, 4}, "S(0),S(0)", "R,R", CommKind::kAllGather}));

}  // namespace
}  // namespace dtensor
