// RotaryTablesOf: explicit positions give the angle tables of those
// positions (checked entry by entry against cos and sin computed here),
// whether they take the cached path (a few runs of consecutive positions,
// ascending or negated) or the host path (anything else).
#include "dtensor/tensor/rotary_tables.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// Expects tables [positions.size(), half] with entry [s, i] the cosine and
// sine of positions[s] * theta^(-i / half).
void ExpectTablesOf(const RotaryTables& tables,
                    const std::vector<int64_t>& positions, int64_t half,
                    double theta) {
  const std::string context =
      absl::StrCat("positions [", absl::StrJoin(positions, ","), "]");
  const int64_t seq = static_cast<int64_t>(positions.size());
  ASSERT_EQ(tables.cos.shape(), (Shape{seq, half})) << context;
  ASSERT_EQ(tables.sin.shape(), (Shape{seq, half})) << context;
  const std::vector<double> cos = tables.cos.ToVector<double>().value();
  const std::vector<double> sin = tables.sin.ToVector<double>().value();
  for (int64_t s = 0; s < seq; ++s) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(positions[s]) / std::pow(theta, double(i) / half);
      EXPECT_NEAR(cos[s * half + i], std::cos(angle), 1e-12)
          << context << " cos[" << s << ", " << i << "]";
      EXPECT_NEAR(sin[s * half + i], std::sin(angle), 1e-12)
          << context << " sin[" << s << ", " << i << "]";
    }
  }
}

// Runs of consecutive positions: context parallelism's balanced chunks (two
// runs), their negations (the backward's inverse rotation), one run, and up
// to kMaxCachedRotaryRuns + 3 runs (past the cached path's limit).
TEST(RotaryTablesTest, RunsOfPositionsGiveTheirAngles) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int runs = 1 + trial % (kMaxCachedRotaryRuns + 3);
    const bool negated = trial % 2 == 1;
    std::vector<int64_t> positions;
    for (int r = 0; r < runs; ++r) {
      const int64_t first = rng() % 40;
      const int64_t length = 1 + rng() % 5;
      for (int64_t p = first; p < first + length; ++p) {
        positions.push_back(negated ? -p : p);
      }
    }
    const int64_t half = 1 + rng() % 4;
    absl::StatusOr<RotaryTables> tables =
        RotaryTablesOf(positions, half, 500.0, Device::CPU());
    ASSERT_TRUE(tables.ok()) << tables.status();
    ExpectTablesOf(*tables, positions, half, 500.0);
  }
}

// Positions in no order, empty positions, and a balanced split of 16
// positions over cp = 2 (rank 1: chunks 1 and 2 of 4).
TEST(RotaryTablesTest, AnyPositionsGiveTheirAngles) {
  std::mt19937 rng(12);
  std::vector<std::vector<int64_t>> cases = {
      {}, {0}, {-3}, {4, 5, 6, 7, 8, 9, 10, 11}, {0, -1, -2, 5, 4, 3}};
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> positions(1 + rng() % 30);
    for (int64_t& p : positions) p = static_cast<int64_t>(rng() % 200) - 100;
    cases.push_back(positions);
  }
  for (const std::vector<int64_t>& positions : cases) {
    absl::StatusOr<RotaryTables> tables =
        RotaryTablesOf(positions, 3, 10000.0, Device::CPU());
    ASSERT_TRUE(tables.ok()) << tables.status();
    ExpectTablesOf(*tables, positions, 3, 10000.0);
  }
}

// One run of positions is rows of the cached tables, not new ones.
TEST(RotaryTablesTest, OneRunIsRowsOfTheCachedTables) {
  const RotaryTables cached =
      CachedRotaryTables(0, 9, 4, 321.0, /*inverse=*/false, Device::CPU())
          .value();
  const RotaryTables run =
      RotaryTablesOf({5, 6, 7, 8}, 4, 321.0, Device::CPU()).value();
  EXPECT_EQ(run.cos.storage(), cached.cos.storage());
  EXPECT_EQ(run.sin.storage(), cached.sin.storage());
  const RotaryTables inverse_cached =
      CachedRotaryTables(0, 9, 4, 321.0, /*inverse=*/true, Device::CPU())
          .value();
  const RotaryTables negated =
      RotaryTablesOf({-5, -6, -7, -8}, 4, 321.0, Device::CPU()).value();
  EXPECT_EQ(negated.sin.storage(), inverse_cached.sin.storage());
}

}  // namespace
}  // namespace dtensor
