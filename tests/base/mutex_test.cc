#include "dtensor/base/mutex.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(MutexTest, ExcludesWritersFromEachOther) {
  Mutex mu;
  int64_t counter = 0;  // Unsynchronized increments would lose updates.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        MutexLock lock(&mu);
        counter = counter + 1;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter, 80000);
}

TEST(MutexTest, ReadersHoldTheLockTogether) {
  Mutex mu;
  Notification first_holds;
  Notification second_held;
  std::thread first([&] {
    ReaderMutexLock lock(&mu);
    first_holds.Notify();
    // Returns only if a second reader got in while this one holds the lock.
    EXPECT_TRUE(second_held.WaitForNotificationWithTimeout(absl::Seconds(30)));
  });
  first_holds.WaitForNotification();
  {
    ReaderMutexLock lock(&mu);
    second_held.Notify();
  }
  first.join();
}

TEST(MutexTest, AwaitReturnsOnceAnotherThreadMakesTheConditionTrue) {
  Mutex mu;
  bool ready = false;
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    MutexLock lock(&mu);
    ready = true;
  });
  {
    MutexLock lock(&mu);
    mu.Await([&] { return ready; });
    EXPECT_TRUE(ready);
  }
  setter.join();
}

TEST(MutexTest, AwaitWithTimeoutGivesUpAndReportsTheCondition) {
  Mutex mu;
  MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(
      mu.AwaitWithTimeout([] { return false; }, absl::Milliseconds(50)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_TRUE(mu.AwaitWithTimeout([] { return true; }, absl::ZeroDuration()));
}

// Each awaiter changes the state before it waits, for the other one to see:
// the second's entry must wake the first even though it never calls Unlock.
TEST(MutexTest, AwaitersSeeChangesMadeBeforeAnotherAwaitBegins) {
  Mutex mu;
  int arrived = 0;
  auto arrive_and_wait_for_both = [&] {
    MutexLock lock(&mu);
    ++arrived;
    EXPECT_TRUE(
        mu.AwaitWithTimeout([&] { return arrived == 2; }, absl::Seconds(30)));
  };
  std::thread first(arrive_and_wait_for_both);
  std::thread second(arrive_and_wait_for_both);
  first.join();
  second.join();
}

TEST(CondVarTest, WaitWithDeadlineTimesOutWithoutASignal) {
  Mutex mu;
  CondVar changed;
  MutexLock lock(&mu);
  EXPECT_TRUE(
      changed.WaitWithDeadline(&mu, absl::Now() + absl::Milliseconds(30)));
}

TEST(CondVarTest, SignalAllWakesEveryWaiter) {
  Mutex mu;
  CondVar changed;
  int generation = 0;
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < 3; ++t) {
    waiters.emplace_back([&] {
      MutexLock lock(&mu);
      while (generation == 0) changed.Wait(&mu);
      woken.fetch_add(1);
    });
  }
  absl::SleepFor(absl::Milliseconds(20));
  {
    MutexLock lock(&mu);
    generation = 1;
    changed.SignalAll();
  }
  for (std::thread& waiter : waiters) waiter.join();
  EXPECT_EQ(woken.load(), 3);
}

// A thread in Await must see a change made by a thread that then waits on a
// CondVar (releasing the lock without Unlock).
TEST(CondVarTest, WaitingOnACondVarWakesAwaiters) {
  Mutex mu;
  CondVar never_signalled;
  bool changed = false;
  std::thread awaiter([&] {
    MutexLock lock(&mu);
    EXPECT_TRUE(
        mu.AwaitWithTimeout([&] { return changed; }, absl::Seconds(30)));
  });
  absl::SleepFor(absl::Milliseconds(20));
  {
    MutexLock lock(&mu);
    changed = true;
    never_signalled.WaitWithDeadline(&mu,
                                     absl::Now() + absl::Milliseconds(100));
  }
  awaiter.join();
}

TEST(NotificationTest, WaitersReturnAfterNotify) {
  Notification done;
  EXPECT_FALSE(done.HasBeenNotified());
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(10)));
  std::thread notifier([&] { done.Notify(); });
  done.WaitForNotification();
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  notifier.join();
}

}  // namespace
}  // namespace dtensor
