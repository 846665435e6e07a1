#include "dtensor/sharding.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

Sharding MustParse(const std::string& text, int64_t tensor_rank) {
  absl::StatusOr<Sharding> sharding = Sharding::Parse(text, tensor_rank);
  EXPECT_TRUE(sharding.ok()) << text << ": " << sharding.status();
  return sharding.ok() ? *sharding : Sharding();
}

// The error message of parsing `text`, or "" when it parses.
std::string ParseError(const std::string& text, int64_t tensor_rank) {
  absl::StatusOr<Sharding> sharding = Sharding::Parse(text, tensor_rank);
  return sharding.ok() ? "" : std::string(sharding.status().message());
}

std::string OrderError(const std::vector<Placement>& placements,
                       int64_t tensor_rank, const ShardOrder& order) {
  absl::StatusOr<Sharding> sharding =
      Sharding::FromPlacements(placements, tensor_rank, order);
  return sharding.ok() ? "" : std::string(sharding.status().message());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ShardingTest, ParsePrintRoundTrips) {
  struct Case {
    std::string text;
    int64_t rank;
    std::string printed;
  };
  const Case cases[] = {
      {"S(0),S(0)", 2, "S(0),S(0)"},
      {"S(0)[0],S(0)[1]", 2, "S(0),S(0)"},
      {"S(0)[1],S(0)[0]", 2, "S(0)[1],S(0)[0]"},
      {"S(-2), S(-1)", 2, "S(0),S(1)"},
      {"P,R", 1, "P(sum),R"},
      {"P(max),S(0)[0]", 1, "P(max),S(0)"},
      {"S(0)[1],S(1),S(0)[0],R", 2, "S(0)[1],S(1),S(0)[0],R"},
      {"S(1)[2],S(1)[0],S(1)[1]", 3, "S(1)[2],S(1)[0],S(1)[1]"},
      {"R", 0, "R"},
      {"P(avg),P(min)", 0, "P(avg),P(min)"},
  };
  for (const Case& c : cases) {
    const Sharding sharding = MustParse(c.text, c.rank);
    EXPECT_EQ(sharding.ToString(), c.printed) << c.text;
    EXPECT_EQ(MustParse(sharding.ToString(), c.rank), sharding) << c.text;
  }
}

TEST(ShardingTest, SpellingsOfOneShardingCompareAndHashEqual) {
  const std::vector<std::vector<std::string>> groups = {
      {"S(0),S(0)", "S(0)[0],S(0)[1]", "S(-2),S(0)", " S(0)[0] , S(-2)[1] "},
      {"S(0)[1],S(0)[0]", "S(-2)[1],S(0)[0]"},
      {"P,R", "P(sum),R", "P( sum ),R"},
      {"S(1),P(max),S(1)", "S(-1)[0],P(max),S(1)[1]"},
  };
  std::vector<Sharding> representatives;
  for (const auto& group : groups) {
    const Sharding first = MustParse(group[0], 2);
    for (const std::string& text : group) {
      const Sharding other = MustParse(text, 2);
      EXPECT_EQ(other, first) << text << " vs " << group[0];
      EXPECT_EQ(absl::Hash<Sharding>()(other), absl::Hash<Sharding>()(first))
          << text;
    }
    representatives.push_back(first);
  }
  for (size_t i = 0; i < representatives.size(); ++i) {
    for (size_t j = i + 1; j < representatives.size(); ++j) {
      EXPECT_NE(representatives[i], representatives[j]);
    }
  }
  // The same placements for tensors of different rank are different layouts.
  EXPECT_NE(MustParse("S(0),R", 1), MustParse("S(0),R", 2));
}

TEST(ShardingTest, FromPlacementsWithOrderMatchesParsedPositions) {
  const std::vector<Placement> placements = {
      Placement::Shard(0), Placement::Shard(1), Placement::Shard(-2)};
  absl::StatusOr<Sharding> explicit_default =
      Sharding::FromPlacements(placements, 2, {{0, 2}, {1}});
  ASSERT_TRUE(explicit_default.ok()) << explicit_default.status();
  EXPECT_EQ(*explicit_default, MustParse("S(0),S(1),S(0)", 2));
  EXPECT_EQ(*explicit_default, *Sharding::FromPlacements(placements, 2));

  absl::StatusOr<Sharding> swapped =
      Sharding::FromPlacements(placements, 2, {{2, 0}, {1}});
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(*swapped, MustParse("S(0)[1],S(1),S(0)[0]", 2));
  EXPECT_EQ(swapped->ToString(), "S(0)[1],S(1),S(0)[0]");
  EXPECT_EQ(swapped->shard_order(), (ShardOrder{{2, 0}, {1}}));
  EXPECT_EQ(swapped->MeshDimsSharding(0), (MeshDimList{2, 0}));
  EXPECT_EQ(swapped->nesting_position(0), 1);
  EXPECT_EQ(swapped->nesting_position(2), 0);
  EXPECT_FALSE(swapped->HasDefaultOrder(0));
  EXPECT_TRUE(swapped->HasDefaultOrder(1));
  EXPECT_EQ(swapped->placements(),
            (std::vector<Placement>{Placement::Shard(0), Placement::Shard(1),
                                    Placement::Shard(0)}));
}

TEST(ShardingTest, ReplicaMeshDimsAreTheNonShardDims) {
  const Sharding sharding = MustParse("R,S(1),P(avg),S(0)", 3);
  EXPECT_EQ(sharding.mesh_ndim(), 4);
  EXPECT_EQ(sharding.tensor_rank(), 3);
  EXPECT_EQ(sharding.ReplicaMeshDims(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(sharding.placement(2), Placement::Partial(ReduceOp::kAvg));
  EXPECT_EQ(sharding.shard_order(), (ShardOrder{{3}, {1}, {}}));
  EXPECT_TRUE(sharding.MeshDimsSharding(2).empty());
}

TEST(ShardingTest, ParseErrorsNameTheBadValue) {
  EXPECT_TRUE(Contains(ParseError("S(2),R", 2), "S(2)"));
  EXPECT_TRUE(Contains(ParseError("S(2),R", 2), "mesh dim 0"));
  EXPECT_TRUE(Contains(ParseError("R,S(-3)", 2), "S(-3)"));
  EXPECT_TRUE(Contains(ParseError("S(0),,R", 2), "''"));
  EXPECT_TRUE(Contains(ParseError("", 2), "''"));
  EXPECT_TRUE(Contains(ParseError("S(0),Q", 2), "'Q'"));
  EXPECT_TRUE(Contains(ParseError("S(0)[0],S(0)[0]", 2), "[0, 0]"));
  EXPECT_TRUE(Contains(ParseError("S(0)[2],S(0)[0]", 2), "[2, 0]"));
  EXPECT_TRUE(Contains(ParseError("S(0)[1]", 2), "[1]"));
  EXPECT_TRUE(Contains(ParseError("S(0)[1],S(0)", 2), "all or none"));
  EXPECT_TRUE(Contains(ParseError("R[0],S(0)", 2), "'R[0]'"));
  EXPECT_TRUE(Contains(ParseError("P(max)[0]", 2), "'P(max)[0]'"));
  EXPECT_TRUE(Contains(ParseError("S(0)[x]", 2), "'S(0)[x]'"));
  EXPECT_TRUE(Contains(ParseError("S(0)[-1]", 2), "'S(0)[-1]'"));
  EXPECT_TRUE(Contains(ParseError("S(0)[]", 2), "'S(0)[]'"));
  EXPECT_TRUE(Contains(ParseError("S(0)0]", 2), "'S(0)0]'"));
  EXPECT_TRUE(Contains(ParseError("R", -1), "-1"));
}

TEST(ShardingTest, OrderErrorsNameTheBadValue) {
  const std::vector<Placement> s0s0 = {Placement::Shard(0),
                                       Placement::Shard(0)};
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{0, 0}, {}}), "listed twice"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{0, 0}, {}}), "[0, 0]"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{1, 5}, {}}), "mesh dim 5"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{1, -1}, {}}), "mesh dim -1"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{1}, {}}), "mesh dim 0"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{1}, {}}), "missing"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{0, 1}, {0}}), "S(1)"));
  EXPECT_TRUE(Contains(OrderError(s0s0, 2, {{0, 1}}), "1 entries"));
  EXPECT_TRUE(Contains(
      OrderError({Placement::Replicate(), Placement::Shard(0)}, 1, {{0, 1}}),
      "placement R"));
  EXPECT_EQ(OrderError(s0s0, 2, {{1, 0}, {}}), "");
}

// Random placements and orders survive ToString -> Parse and
// placements() + shard_order() -> FromPlacements.
TEST(ShardingTest, RandomShardingsRoundTrip) {
  std::mt19937 rng(17);
  for (int iteration = 0; iteration < 500; ++iteration) {
    const int64_t rank = rng() % 4;
    const int64_t mesh_ndim = 1 + rng() % 5;
    std::vector<Placement> placements;
    ShardOrder order(rank);
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      const int kind = rng() % 4;
      if (kind >= 2 && rank > 0) {
        const int64_t dim = static_cast<int64_t>(rng() % (2 * rank)) - rank;
        placements.push_back(Placement::Shard(dim));
        order[dim < 0 ? dim + rank : dim].push_back(m);
      } else if (kind == 1) {
        placements.push_back(
            Placement::Partial(static_cast<ReduceOp>(rng() % 4)));
      } else {
        placements.push_back(Placement::Replicate());
      }
    }
    for (auto& mesh_dims : order) {
      std::shuffle(mesh_dims.begin(), mesh_dims.end(), rng);
    }
    absl::StatusOr<Sharding> sharding =
        Sharding::FromPlacements(placements, rank, order);
    ASSERT_TRUE(sharding.ok()) << sharding.status();
    EXPECT_EQ(sharding->shard_order(), order);
    EXPECT_EQ(MustParse(sharding->ToString(), rank), *sharding)
        << sharding->ToString();
    absl::StatusOr<Sharding> rebuilt = Sharding::FromPlacements(
        sharding->placements(), rank, sharding->shard_order());
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
    EXPECT_EQ(*rebuilt, *sharding);
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      if (!placements[m].is_shard()) {
        EXPECT_EQ(sharding->placement(m), placements[m]);
        continue;
      }
      const int64_t d = sharding->placement(m).dim();
      EXPECT_EQ(d, placements[m].dim() < 0 ? placements[m].dim() + rank
                                           : placements[m].dim());
      EXPECT_EQ(order[d][sharding->nesting_position(m)], m);
    }
  }
}

}  // namespace
}  // namespace dtensor
