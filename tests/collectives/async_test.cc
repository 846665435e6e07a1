// The asynchronous forms: several calls in flight at once, mixed with
// synchronous ones, finish in order with the right results; sends and
// receives in flight together do not wait on each other; argument errors
// come back as finished Work.
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "dtensor/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::ConcatHost;
using testing::HostTensor;
using testing::Matches;
using testing::RandomHost;
using testing::ReduceHost;
using testing::RunOnWorld;
using testing::ToTensor;

TEST(AsyncTest, CallsInFlightFinishInOrderWithTheirResults) {
  for (int64_t n : {1, 2, 3, 5}) {
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          const int64_t me = world.rank();
          std::vector<HostTensor> a;
          std::vector<HostTensor> b;
          for (int64_t r = 0; r < n; ++r) {
            a.push_back(RandomHost({6}, DType::kF32, r));
            b.push_back(RandomHost({2, 3}, DType::kI64, 10 + r));
          }
          Tensor reduced = ToTensor(a[me], DType::kF32);
          Tensor gathered = Tensor::Zeros({2, 3 * n}, DType::kI64).value();
          Tensor broadcast = ToTensor(b[me], DType::kI64);
          std::vector<std::shared_ptr<Work>> works;
          works.push_back(world.AllReduceAsync(reduced, ReduceOp::kSum));
          works.push_back(
              world.AllGatherAsync(ToTensor(b[me], DType::kI64), gathered, 1));
          // A synchronous call queues behind the asynchronous ones.
          DT_RETURN_IF_ERROR(world.Barrier());
          works.push_back(world.BroadcastAsync(broadcast, n - 1));
          // The same tensor again: runs after the first all_reduce.
          works.push_back(world.AllReduceAsync(reduced, ReduceOp::kMax));
          for (const auto& work : works) DT_RETURN_IF_ERROR(work->Wait());
          const HostTensor sum = ReduceHost(a, ReduceOp::kSum, DType::kF32);
          EXPECT_TRUE(Matches(reduced, sum));
          EXPECT_TRUE(Matches(gathered, ConcatHost(b, 1)));
          EXPECT_TRUE(Matches(broadcast, b[n - 1]));
          return absl::OkStatus();
        }).ok());
  }
}

TEST(AsyncTest, SendsAndReceivesInFlightDoNotBlockEachOther) {
  for (int64_t n = 2; n <= 6; ++n) {
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  const int64_t me = world.rank();
                  // Everyone sends first: this needs both in flight at once.
                  Tensor sent =
                      ToTensor(RandomHost({4}, DType::kF64, me), DType::kF64);
                  Tensor received = Tensor::Zeros({4}, DType::kF64).value();
                  auto send = world.SendAsync(sent, (me + 1) % n);
                  auto recv = world.RecvAsync(received, (me + n - 1) % n);
                  DT_RETURN_IF_ERROR(send->Wait());
                  DT_RETURN_IF_ERROR(recv->Wait());
                  EXPECT_TRUE(Matches(received, RandomHost({4}, DType::kF64,
                                                           (me + n - 1) % n)));
                  return absl::OkStatus();
                }).ok());
  }
}

TEST(AsyncTest, WorkIsPendingWhileAPeerIsLate) {
  ASSERT_TRUE(RunOnWorld(2, [](Communicator& world) -> absl::Status {
                Tensor tensor = Tensor::Ones({3}, DType::kF32).value();
                if (world.rank() == 1) {
                  absl::SleepFor(absl::Milliseconds(100));
                  return world.AllReduce(tensor, ReduceOp::kSum);
                }
                auto work = world.AllReduceAsync(tensor, ReduceOp::kSum);
                EXPECT_FALSE(work->IsCompleted());
                DT_RETURN_IF_ERROR(work->Wait());
                EXPECT_TRUE(work->IsCompleted());
                EXPECT_EQ(tensor.ToVector<float>().value(),
                          (std::vector<float>{2, 2, 2}));
                return absl::OkStatus();
              }).ok());
}

TEST(AsyncTest, ArgumentErrorsComeBackAsFinishedWork) {
  ASSERT_TRUE(RunOnWorld(2, [](Communicator& world) -> absl::Status {
                auto work = world.AllReduceAsync(Tensor(), ReduceOp::kSum);
                EXPECT_TRUE(work->IsCompleted());
                const absl::Status status = work->Wait();
                EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
                EXPECT_EQ(status.message(), "all_reduce: tensor is undefined");
                // The failed call took no turn: the next one pairs up.
                return world.Barrier();
              }).ok());
}

}  // namespace
}  // namespace dtensor
