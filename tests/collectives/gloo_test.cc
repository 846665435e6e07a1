// The Gloo backend with real processes on loopback: collective_worker runs each
// scenario as one process per rank (started as dtrun starts them) and
// checks its results against references of its own; these tests check how
// the processes ended and show their output when they did not end well.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collectives/gloo/store_server.h"
#include "gtest/gtest.h"
#include "tools/dtrun_launcher.h"

namespace dtensor {
namespace {

constexpr char kWorker[] = "tests/collectives/collective_worker";

struct Outcome {
  std::vector<int> exit_codes;
  std::string output;
  absl::Duration took;
};

// Runs `scenario` on `nproc` worker processes and collects how they ended.
// `store_port`: rank 0 hosts the store there (else the launcher does).
Outcome RunScenario(const std::string& scenario, int64_t nproc,
                    bool terminate_on_failure = true,
                    std::optional<int> store_port = std::nullopt) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gloo_test_output_XXXXXX");
  const int fd = ::mkstemp(path.data());
  EXPECT_GE(fd, 0);
  LaunchOptions options;
  options.nproc = nproc;
  options.command = {kWorker, "gloo", scenario};
  options.terminate_on_failure = terminate_on_failure;
  if (store_port.has_value()) {
    options.host_store = false;
    options.master_port = *store_port;
  }
  options.timeout = absl::Seconds(90);
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchResult> result = Launch(options, fd, fd);
  Outcome outcome;
  outcome.took = absl::Now() - start;
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) outcome.exit_codes = result->exit_codes;
  ::lseek(fd, 0, SEEK_SET);
  char buffer[4096];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof(buffer))) > 0;) {
    outcome.output.append(buffer, got);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return outcome;
}

std::string Codes(const Outcome& outcome) {
  return absl::StrCat("[", absl::StrJoin(outcome.exit_codes, ", "), "]");
}

void ExpectAllSucceed(const Outcome& outcome, int64_t nproc) {
  EXPECT_EQ(outcome.exit_codes, std::vector<int>(nproc, 0))
      << "exit codes " << Codes(outcome) << "; output:\n"
      << outcome.output;
}

class GlooCollectivesTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GlooCollectivesTest, EveryOpMatchesItsReference) {
  ExpectAllSucceed(RunScenario("collectives", GetParam()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCollectivesTest,
                         ::testing::Values(1, 2, 3, 4));

TEST(GlooTest, SubgroupsRunTheSameOps) {
  ExpectAllSucceed(RunScenario("subgroups", 4), 4);
}

TEST(GlooTest, RankZeroHostsTheStoreWithoutALauncherStore) {
  // A free port: a store takes one and gives it back.
  absl::StatusOr<std::unique_ptr<StoreServer>> probe =
      StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int port = (*probe)->port();
  probe->reset();
  ExpectAllSucceed(RunScenario("smoke", 3, true, port), 3);
}

TEST(GlooTest, DebugModeReportsMismatchedCallsOnEveryRank) {
  ExpectAllSucceed(RunScenario("debug", 3), 3);
}

TEST(GlooTest, ExitedRankMakesItsPeersFailWithUnavailable) {
  const Outcome outcome =
      RunScenario("exit_mid_collective", 3, /*terminate_on_failure=*/false);
  EXPECT_EQ(outcome.exit_codes, (std::vector<int>{0, 0, 7})) << "output:\n"
                                                             << outcome.output;
  EXPECT_LT(outcome.took, absl::Seconds(20));
}

TEST(GlooTest, MissingRankMakesItsPeersFailWithinTheDeadline) {
  ExpectAllSucceed(RunScenario("missing_rank", 3), 3);
}

TEST(GlooTest, PointToPointDeadlinesNameThePeer) {
  ExpectAllSucceed(RunScenario("p2p_deadline", 2), 2);
}

TEST(GlooTest, CreatingAGroupNamesTheMembersThatDidNotJoin) {
  ExpectAllSucceed(RunScenario("missing_member", 3), 3);
}

}  // namespace
}  // namespace dtensor
