// Seeded, time-bounded fuzzing of every parser and subcommand in CI: each
// target gets its seeds and then mutations for a fixed time; any crash,
// abort, hang (over 60 s for one input) or broken error contract fails the
// test and names the input. Longer runs: tests/fuzz/fuzz_driver
// (docs/reliability.md).
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_runner.h"
#include "tests/fuzz/fuzz_targets.h"

namespace dtensor {
namespace fuzz {
namespace {

class FuzzTest : public ::testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzTest, EveryInputGivesAValueOrAnError) {
  const FuzzTarget& target = GetParam();
  FuzzOptions options;
  options.seed = 20261125;
  // About 20 s for the whole test: the parsers take microseconds an input,
  // the subcommands up to tens of milliseconds.
  options.max_time = absl::Milliseconds(1500);
  // Wall time: generous, since CI machines may be heavily shared (an explain
  // on 288 ranks takes 2 s of CPU but took 12 s on a loaded machine).
  options.hang_limit = absl::Seconds(60);
  absl::StatusOr<FuzzStats> stats = RunFuzz(target, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::printf("fuzz %s: %lld inputs, slowest %s\n", target.name,
              static_cast<long long>(stats->inputs),
              absl::FormatDuration(stats->slowest).c_str());
  // The seeds ran and mutations followed.
  EXPECT_GT(stats->inputs, static_cast<int64_t>(target.seeds.size()));
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzTest,
                         ::testing::ValuesIn(FuzzTargets().begin(),
                                             FuzzTargets().end()),
                         [](const ::testing::TestParamInfo<FuzzTarget>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace fuzz
}  // namespace dtensor
