// Faults: a rank that fails or throws aborts its peers' collectives; a rank
// that never arrives gives DeadlineExceeded naming the op, the group and the
// missing ranks; a rank that exited gives Unavailable; a broken communicator
// stays broken; deadlines come from the call, the communicator or the
// process-wide default. Deadlines here are short; the aborts are checked to
// come well before the (long) deadline.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::TestOptions;

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

Tensor Ones() { return Tensor::Ones({4}, DType::kF32).value(); }

TEST(FaultTest, RankReturningAnErrorAbortsThePeers) {
  // A long deadline: the peers must fail because of the abort, not by it.
  LocalCluster cluster(4, TestOptions(absl::Seconds(60)));
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        Tensor tensor = Ones();
        DT_RETURN_IF_ERROR(world->AllReduce(tensor, ReduceOp::kSum));
        if (groups.rank() == 2) return absl::InternalError("boom");
        return world->AllReduce(tensor, ReduceOp::kSum);
      });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(statuses[2], absl::InternalError("boom"));
  for (int64_t r : {0, 1, 3}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << r;
    EXPECT_TRUE(Contains(statuses[r], "all_reduce #1 on group [0, 1, 2, 3]"))
        << statuses[r];
    EXPECT_TRUE(Contains(statuses[r], "rank 2 failed")) << statuses[r];
    EXPECT_TRUE(Contains(statuses[r], "boom")) << statuses[r];
  }
}

TEST(FaultTest, RunReturnsTheCauseNotTheAborts) {
  LocalCluster cluster(3, TestOptions(absl::Seconds(60)));
  const absl::Status status = cluster.Run([](ProcessGroups& groups) {
    if (groups.rank() == 1) return absl::NotFoundError("no such file");
    return groups.World().value()->Barrier();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "rank 1: no such file");
}

TEST(FaultTest, RankThrowingAbortsThePeers) {
  LocalCluster cluster(3, TestOptions(absl::Seconds(60)));
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        Tensor tensor = Ones();
        DT_RETURN_IF_ERROR(world->AllReduce(tensor, ReduceOp::kMax));
        if (groups.rank() == 0) throw std::runtime_error("kaboom");
        Tensor output = Tensor::Zeros({12}, DType::kF32).value();
        return world->AllGather(tensor, output, 0);
      });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(Contains(statuses[0], "kaboom")) << statuses[0];
  for (int64_t r : {1, 2}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << r;
    EXPECT_TRUE(Contains(statuses[r], "all_gather #1")) << statuses[r];
    EXPECT_TRUE(Contains(statuses[r], "kaboom")) << statuses[r];
  }
}

TEST(FaultTest, AbortReachesSubgroupsAndAsyncCalls) {
  // Ranks 0 and 1 wait in a sub-group collective and an async one when
  // rank 3, outside their group, fails.
  LocalCluster cluster(4, TestOptions(absl::Seconds(60)));
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([](ProcessGroups& groups) -> absl::Status {
        if (groups.rank() == 3) {
          absl::SleepFor(absl::Milliseconds(50));
          return absl::AbortedError("gave up");
        }
        if (groups.rank() == 2) {
          Tensor tensor = Ones();
          return groups.World().value()->AllReduce(tensor, ReduceOp::kSum);
        }
        DT_ASSIGN_OR_RETURN(auto pair, groups.ForRanks({0, 1}));
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        Tensor tensor = Ones();
        auto pending = world->AllReduceAsync(tensor, ReduceOp::kSum);
        DT_RETURN_IF_ERROR(pair->Barrier());  // Both arrive: succeeds.
        // Rank 1 never sends: rank 0 waits until the abort.
        if (groups.rank() == 0) {
          EXPECT_EQ(pair->Recv(tensor, 1).code(),
                    absl::StatusCode::kUnavailable);
        }
        return pending->Wait();
      });
  for (int64_t r : {0, 1, 2}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << r;
    EXPECT_TRUE(Contains(statuses[r], "gave up")) << statuses[r];
  }
}

TEST(FaultTest, MissingRankGivesDeadlineExceededNamingOpGroupAndRanks) {
  const absl::Duration deadline = absl::Milliseconds(200);
  LocalCluster cluster(4, TestOptions(deadline));
  std::vector<absl::Duration> waited(4);
  std::vector<absl::Status> seen(4);
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        DT_RETURN_IF_ERROR(world->Barrier());
        // Rank 3 shows up long after the others' deadline.
        if (groups.rank() == 3) {
          absl::SleepFor(3 * deadline);
          return absl::OkStatus();
        }
        const absl::Time start = absl::Now();
        Tensor tensor = Ones();
        seen[groups.rank()] = world->AllReduce(tensor, ReduceOp::kSum);
        waited[groups.rank()] = absl::Now() - start;
        return absl::OkStatus();
      });
  for (int64_t r : {0, 1, 2}) {
    EXPECT_EQ(seen[r].code(), absl::StatusCode::kDeadlineExceeded) << seen[r];
    EXPECT_TRUE(Contains(seen[r], "all_reduce #1 on group [0, 1, 2, 3]"))
        << seen[r];
    EXPECT_TRUE(Contains(seen[r], "ranks [3] did not arrive within 200ms"))
        << seen[r];
    EXPECT_LT(waited[r], deadline + absl::Seconds(2)) << r;
  }
  // The first to give up waited its whole deadline; the others learned of it
  // (they may have started a little later).
  EXPECT_GE(std::max({waited[0], waited[1], waited[2]}), deadline);
  for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok());
}

TEST(FaultTest, ExitedRankGivesUnavailableWithoutWaitingForTheDeadline) {
  LocalCluster cluster(3, TestOptions(absl::Seconds(60)));
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([](ProcessGroups& groups) -> absl::Status {
        if (groups.rank() == 1) return absl::OkStatus();
        return groups.World().value()->Barrier();
      });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(statuses[1].ok());
  for (int64_t r : {0, 2}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << r;
    EXPECT_TRUE(Contains(statuses[r], "barrier #0 on group [0, 1, 2]"))
        << statuses[r];
    EXPECT_TRUE(Contains(statuses[r], "ranks [1] exited")) << statuses[r];
  }
}

TEST(FaultTest, CommunicatorStaysBrokenAfterADeadline) {
  LocalCluster cluster(2, TestOptions(absl::Milliseconds(100)));
  std::vector<absl::Status> first(2);
  std::vector<absl::Status> second(2);
  cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(auto world, groups.World());
    Tensor tensor = Ones();
    if (groups.rank() == 1) absl::SleepFor(absl::Milliseconds(400));
    first[groups.rank()] = world->AllReduce(tensor, ReduceOp::kSum);
    second[groups.rank()] = world->Barrier();
    return absl::OkStatus();
  });
  // Rank 0 timed out; rank 1, late, finds the group broken with rank 0's
  // error; later calls fail the same way.
  EXPECT_EQ(first[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(first[0], "ranks [1] did not arrive")) << first[0];
  EXPECT_EQ(first[1], first[0]);
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(second[1], first[0]);
}

TEST(FaultTest, PointToPointDeadlinesNameThePeer) {
  LocalCluster cluster(2, TestOptions(absl::Seconds(60)));
  std::vector<absl::Status> seen(2);
  cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(auto world, groups.World());
    Tensor tensor = Ones();
    CollectiveOptions quick;
    quick.deadline = absl::Milliseconds(100);
    // Both send first: neither receives in time.
    seen[groups.rank()] = world->Send(tensor, 1 - groups.rank(), quick);
    return world->Barrier();
  });
  for (int64_t r : {0, 1}) {
    EXPECT_EQ(seen[r].code(), absl::StatusCode::kDeadlineExceeded) << seen[r];
    EXPECT_TRUE(
        Contains(seen[r], absl::StrCat("send on group [0, 1]: ranks [", 1 - r,
                                       "] did not receive within "
                                       "100ms")))
        << seen[r];
  }
  cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(auto world, groups.World());
    Tensor tensor = Ones();
    CollectiveOptions quick;
    quick.deadline = absl::Milliseconds(100);
    seen[groups.rank()] = world->Recv(tensor, 1 - groups.rank(), quick);
    return world->Barrier();
  });
  for (int64_t r : {0, 1}) {
    EXPECT_EQ(seen[r].code(), absl::StatusCode::kDeadlineExceeded) << seen[r];
    EXPECT_TRUE(Contains(seen[r], "did not send within 100ms")) << seen[r];
  }
}

TEST(FaultTest, AsyncWorkFailsWithinItsDeadline) {
  LocalCluster cluster(2, TestOptions(absl::Milliseconds(150)));
  std::vector<absl::Status> seen(2);
  cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(auto world, groups.World());
    if (groups.rank() == 1) {
      absl::SleepFor(absl::Milliseconds(500));
      return absl::OkStatus();
    }
    Tensor tensor = Ones();
    const absl::Time start = absl::Now();
    std::shared_ptr<Work> work = world->AllReduceAsync(tensor, ReduceOp::kSum);
    EXPECT_FALSE(work->IsCompleted());
    seen[0] = work->Wait();
    EXPECT_TRUE(work->IsCompleted());
    EXPECT_EQ(work->Wait(), seen[0]);
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    return absl::OkStatus();
  });
  EXPECT_EQ(seen[0].code(), absl::StatusCode::kDeadlineExceeded) << seen[0];
}

TEST(FaultTest, DeadlinesComeFromTheCallTheCommunicatorOrTheProcess) {
  EXPECT_EQ(DefaultCollectiveDeadline(), absl::Minutes(5));
  SetDefaultCollectiveDeadline(absl::Milliseconds(120));
  // No communicator default: the process-wide one applies.
  CommunicatorOptions no_default = TestOptions();
  no_default.default_deadline.reset();
  std::vector<absl::Status> seen(2);
  LocalCluster(2, no_default).RunPerRank([&](ProcessGroups& groups) {
    if (groups.rank() == 1) {
      absl::SleepFor(absl::Milliseconds(400));
      return absl::OkStatus();
    }
    seen[0] = groups.World().value()->Barrier();
    CollectiveOptions call;
    call.deadline = absl::Milliseconds(30);
    seen[1] = groups.ForRanks({0, 1}).value()->Barrier(call);
    return absl::OkStatus();
  });
  SetDefaultCollectiveDeadline(absl::Minutes(5));
  EXPECT_TRUE(Contains(seen[0], "within 120ms")) << seen[0];
  // The world communicator is broken now: the per-call deadline is not
  // reached, the first error comes back.
  EXPECT_EQ(seen[1], seen[0]);
  // A per-call deadline on a fresh group.
  LocalCluster(2, TestOptions(absl::Seconds(60)))
      .RunPerRank([&](ProcessGroups& groups) {
        if (groups.rank() == 1) {
          absl::SleepFor(absl::Milliseconds(300));
          return absl::OkStatus();
        }
        CollectiveOptions call;
        call.deadline = absl::Milliseconds(30);
        seen[0] = groups.World().value()->Barrier(call);
        return absl::OkStatus();
      });
  EXPECT_TRUE(Contains(seen[0], "within 30ms")) << seen[0];
}

TEST(FaultTest, NonPositiveDeadlinesAreRejected) {
  ASSERT_TRUE(testing::RunOnWorld(1, [](Communicator& world) {
                CollectiveOptions options;
                options.deadline = absl::ZeroDuration();
                const absl::Status status = world.Barrier(options);
                EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
                EXPECT_TRUE(Contains(status, "deadline must be positive"))
                    << status;
                return absl::OkStatus();
              }).ok());
}

}  // namespace
}  // namespace dtensor
