// RotaryTablesOf: explicit positions give the angle tables of those
// positions, and with `inverse` the tables of the negated positions (checked
// entry by entry against cos and sin computed here), whether they take the
// cached path (a few ascending runs of consecutive positions >= 0) or the
// host path (anything else).
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
// sine of positions[s] * theta^(-i / half), or with `inverse` of
// -positions[s] * theta^(-i / half) (the rotation back).
void ExpectTablesOf(const RotaryTables& tables,
                    const std::vector<int64_t>& positions, int64_t half,
                    double theta, bool inverse) {
  const std::string context =
      absl::StrCat("positions [", absl::StrJoin(positions, ","), "]",
                   inverse ? " inverse" : "");
  const int64_t seq = static_cast<int64_t>(positions.size());
  ASSERT_EQ(tables.cos.shape(), (Shape{seq, half})) << context;
  ASSERT_EQ(tables.sin.shape(), (Shape{seq, half})) << context;
  const std::vector<double> cos = tables.cos.ToVector<double>().value();
  const std::vector<double> sin = tables.sin.ToVector<double>().value();
  for (int64_t s = 0; s < seq; ++s) {
    const double position =
        static_cast<double>(inverse ? -positions[s] : positions[s]);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = position / std::pow(theta, double(i) / half);
      EXPECT_NEAR(cos[s * half + i], std::cos(angle), 1e-12)
          << context << " cos[" << s << ", " << i << "]";
      EXPECT_NEAR(sin[s * half + i], std::sin(angle), 1e-12)
          << context << " sin[" << s << ", " << i << "]";
    }
  }
}

// Runs of consecutive positions: context parallelism's balanced chunks (two
// runs), one run, and up to kMaxCachedRotaryRuns + 3 runs (past the cached
// path's limit), forward and inverse (the backward's rotation back).
TEST(RotaryTablesTest, RunsOfPositionsGiveTheirAngles) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int runs = 1 + trial % (kMaxCachedRotaryRuns + 3);
    const bool inverse = trial % 2 == 1;
    std::vector<int64_t> positions;
    for (int r = 0; r < runs; ++r) {
      const int64_t first = rng() % 40;
      const int64_t length = 1 + rng() % 5;
      for (int64_t p = first; p < first + length; ++p) positions.push_back(p);
    }
    const int64_t half = 1 + rng() % 4;
    absl::StatusOr<RotaryTables> tables =
        RotaryTablesOf(positions, half, 500.0, inverse, Device::CPU());
    ASSERT_TRUE(tables.ok()) << tables.status();
    ExpectTablesOf(*tables, positions, half, 500.0, inverse);
  }
}

// Positions in no order, negative ones, empty positions, and a balanced
// split of 16 positions over cp = 2 (rank 1: chunks 1 and 2 of 4), forward
// and inverse.
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
    for (const bool inverse : {false, true}) {
      absl::StatusOr<RotaryTables> tables =
          RotaryTablesOf(positions, 3, 10000.0, inverse, Device::CPU());
      ASSERT_TRUE(tables.ok()) << tables.status();
      ExpectTablesOf(*tables, positions, 3, 10000.0, inverse);
    }
  }
}

// One run of positions is rows of the cached tables (the inverse ones with
// `inverse`), not new ones.
TEST(RotaryTablesTest, OneRunIsRowsOfTheCachedTables) {
  for (const bool inverse : {false, true}) {
    const RotaryTables cached =
        CachedRotaryTables(0, 9, 4, 321.0, inverse, Device::CPU()).value();
    const RotaryTables run =
        RotaryTablesOf({5, 6, 7, 8}, 4, 321.0, inverse, Device::CPU()).value();
    EXPECT_EQ(run.cos.storage(), cached.cos.storage()) << inverse;
    EXPECT_EQ(run.sin.storage(), cached.sin.storage()) << inverse;
  }
}

}  // namespace
}  // namespace dtensor
