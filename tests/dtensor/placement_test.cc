#include "dtensor/placement.h"

#include <string>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(ReduceOpTest, NamesRoundTrip) {
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    absl::StatusOr<ReduceOp> parsed =
        ParseReduceOp(std::string(ReduceOpName(op)));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(ReduceOpName(ReduceOp::kAvg), "avg");
  absl::StatusOr<ReduceOp> bad = ParseReduceOp("prod");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'prod'"), std::string::npos);
}

TEST(PlacementTest, ParsesEveryForm) {
  struct Case {
    std::string text;
    Placement expected;
    std::string printed;
  };
  const Case cases[] = {
      {"R", Placement::Replicate(), "R"},
      {"S(0)", Placement::Shard(0), "S(0)"},
      {"S(12)", Placement::Shard(12), "S(12)"},
      {"S(-1)", Placement::Shard(-1), "S(-1)"},
      {" S( 2 ) ", Placement::Shard(2), "S(2)"},
      {"P", Placement::Partial(ReduceOp::kSum), "P(sum)"},
      {"P(sum)", Placement::Partial(ReduceOp::kSum), "P(sum)"},
      {"P(avg)", Placement::Partial(ReduceOp::kAvg), "P(avg)"},
      {"P(max)", Placement::Partial(ReduceOp::kMax), "P(max)"},
      {"P(min)", Placement::Partial(ReduceOp::kMin), "P(min)"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Placement> parsed = ParsePlacement(c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(*parsed, c.expected) << c.text;
    EXPECT_EQ(parsed->ToString(), c.printed) << c.text;
    absl::StatusOr<Placement> reparsed = ParsePlacement(parsed->ToString());
    ASSERT_TRUE(reparsed.ok());
    EXPECT_EQ(*reparsed, *parsed);
  }
}

TEST(PlacementTest, AccessorsAndEquality) {
  const Placement shard = Placement::Shard(3);
  EXPECT_TRUE(shard.is_shard());
  EXPECT_FALSE(shard.is_partial());
  EXPECT_EQ(shard.dim(), 3);
  const Placement partial = Placement::Partial(ReduceOp::kMax);
  EXPECT_TRUE(partial.is_partial());
  EXPECT_EQ(partial.reduce_op(), ReduceOp::kMax);
  EXPECT_TRUE(Placement().is_replicate());
  EXPECT_EQ(Placement(), Placement::Replicate());
  EXPECT_NE(Placement::Shard(0), Placement::Shard(1));
  EXPECT_NE(Placement::Partial(ReduceOp::kSum),
            Placement::Partial(ReduceOp::kAvg));
  EXPECT_NE(Placement::Shard(0), Placement::Replicate());
  EXPECT_NE(Placement::Partial(), Placement::Replicate());
  EXPECT_EQ(absl::Hash<Placement>()(Placement::Partial()),
            absl::Hash<Placement>()(Placement::Partial(ReduceOp::kSum)));
}

TEST(PlacementTest, MalformedTextIsAnErrorNamingIt) {
  for (const std::string text :
       {"", "X", "r", "S", "S()", "S(a)", "S(1", "S1)", "S(1)x", "P(prod)",
        "P()", "Shard(0)", "RR", "S(1.5)"}) {
    absl::StatusOr<Placement> parsed = ParsePlacement(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("'" + text + "'"),
              std::string::npos)
        << parsed.status();
  }
}

TEST(PlacementTest, NormalizeCountsNegativeDimsFromTheEnd) {
  for (int64_t rank = 1; rank <= 4; ++rank) {
    for (int64_t dim = -rank; dim < rank; ++dim) {
      absl::StatusOr<Placement> p =
          NormalizePlacement(Placement::Shard(dim), rank);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->dim(), dim < 0 ? dim + rank : dim);
    }
  }
  EXPECT_EQ(*NormalizePlacement(Placement::Replicate(), 0),
            Placement::Replicate());
  EXPECT_EQ(*NormalizePlacement(Placement::Partial(ReduceOp::kMin), 2),
            Placement::Partial(ReduceOp::kMin));
}

TEST(PlacementTest, NormalizeRejectsDimsOutOfRange) {
  struct Case {
    int64_t dim, rank;
  };
  for (const Case& c : {Case{2, 2}, Case{-3, 2}, Case{0, 0}, Case{7, 3}}) {
    absl::StatusOr<Placement> p =
        NormalizePlacement(Placement::Shard(c.dim), c.rank);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("dim " + std::to_string(c.dim)),
              std::string::npos)
        << p.status();
  }
}

}  // namespace
}  // namespace dtensor
