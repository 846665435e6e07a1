// The Gloo backend with real processes on loopback: collective_worker runs
// each scenario as one process per rank (started as dtrun starts them) and
// checks its results against references of its own; these tests check how
// the processes ended and show their output when they did not end well.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_server.h"
#include "gtest/gtest.h"
#include "tests/collectives/worker_launch.h"

namespace dtensor {
namespace {

using testing::AllSucceeded;
using testing::RunWorkers;
using testing::WorkerLaunch;
using testing::WorkerOutcome;

WorkerLaunch Gloo(const std::string& scenario, int64_t nproc) {
  WorkerLaunch launch;
  launch.scenario = scenario;
  launch.nproc = nproc;
  return launch;
}

class GlooCollectivesTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GlooCollectivesTest, EveryOpMatchesItsReference) {
  EXPECT_TRUE(
      AllSucceeded(RunWorkers(Gloo("collectives", GetParam())), GetParam()));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCollectivesTest,
                         ::testing::Values(1, 2, 3, 4));

// Three and four ranks, where Gloo's ring would add in another order.
TEST(GlooTest, AllReduceAddsInRankOrder) {
  for (const int64_t nproc : {3, 4}) {
    EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("rank_order", nproc)), nproc));
  }
}

TEST(GlooTest, SubgroupsRunTheSameOps) {
  EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("subgroups", 4)), 4));
}

TEST(GlooTest, RankZeroHostsTheStoreWithoutALauncherStore) {
  // A free port: a store takes one and gives it back.
  absl::StatusOr<std::unique_ptr<StoreServer>> probe =
      StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok()) << probe.status();
  WorkerLaunch launch = Gloo("smoke", 3);
  launch.store_port = (*probe)->port();
  probe->reset();
  EXPECT_TRUE(AllSucceeded(RunWorkers(launch), 3));
}

// While a job meets and runs, a stranger on the store's port tries to write
// the keys its ranks read and to pose as rank 0: refused each time (the job's
// secret, from the launcher), and the job runs to the end.
TEST(GlooTest, AStrangerProbingTheStoreIsRefusedAndTheJobRunsOn) {
  absl::StatusOr<std::unique_ptr<StoreServer>> probe =
      StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok()) << probe.status();
  WorkerLaunch launch = Gloo("collectives", 2);
  launch.store_port = (*probe)->port();
  probe->reset();
  int refused = 0;
  int admitted = 0;
  std::atomic<bool> done{false};
  std::thread stranger([&] {
    while (!done.load()) {
      absl::StatusOr<std::unique_ptr<StoreClient>> writer =
          StoreClient::ConnectWithoutHello("127.0.0.1", *launch.store_port,
                                           absl::Seconds(1));
      if (!writer.ok()) continue;  // Not up yet, or gone.
      const absl::Status set = (*writer)->Set("group0/mesh/0", "garbage");
      absl::StatusOr<std::unique_ptr<StoreClient>> impostor =
          StoreClient::Connect("127.0.0.1", *launch.store_port, 0,
                               absl::Seconds(1), "not the job's secret");
      for (const absl::Status& status : {set, impostor.status()}) {
        if (status.code() == absl::StatusCode::kPermissionDenied) ++refused;
        if (status.ok()) ++admitted;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  const WorkerOutcome outcome = RunWorkers(launch);
  done = true;
  stranger.join();
  EXPECT_TRUE(AllSucceeded(outcome, 2));
  EXPECT_GT(refused, 0);
  EXPECT_EQ(admitted, 0);
}

TEST(GlooTest, DebugModeReportsMismatchedCallsOnEveryRank) {
  EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("debug", 3)), 3));
}

TEST(GlooTest, MismatchedSizesFailEveryRankWithoutAborting) {
  EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("mismatched_sizes", 3)), 3));
}

TEST(GlooTest, ExitedRankMakesItsPeersFailWithUnavailable) {
  WorkerLaunch launch = Gloo("exit_mid_collective", 3);
  launch.terminate_on_failure = false;
  const WorkerOutcome outcome = RunWorkers(launch);
  EXPECT_EQ(outcome.exit_codes, (std::vector<int>{0, 0, 7})) << "output:\n"
                                                             << outcome.output;
  EXPECT_LT(outcome.took, absl::Seconds(20));
}

TEST(GlooTest, MissingRankMakesItsPeersFailWithinTheDeadline) {
  EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("missing_rank", 3)), 3));
}

TEST(GlooTest, PointToPointDeadlinesNameThePeer) {
  EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("p2p_deadline", 2)), 2));
}

TEST(GlooTest, CreatingAGroupNamesTheMembersThatDidNotJoin) {
  EXPECT_TRUE(AllSucceeded(RunWorkers(Gloo("missing_member", 3)), 3));
}

}  // namespace
}  // namespace dtensor
