#include "dtensor/base/mutex.h"

#include <condition_variable>

#include "absl/time/clock.h"

namespace dtensor {
namespace {

// Waits on `cv` for `lock` (held, released while waiting) until notified or
// `deadline`; returns false at the deadline.
template <typename Lock>
bool WaitUntil(std::condition_variable_any& cv, Lock& lock,
               absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    cv.wait(lock);
    return true;
  }
  return cv.wait_until(lock, absl::ToChronoTime(deadline)) ==
         std::cv_status::no_timeout;
}

}  // namespace

void Mutex::Unlock() {
  WakeAwaiters();
  mu_.unlock();
}

void Mutex::WakeAwaiters() {
  if (awaiters_ > 0) released_.notify_all();
}

bool Mutex::WaitForRelease(absl::Time deadline) {
  ++awaiters_;
  const bool released = WaitUntil(released_, mu_, deadline);
  --awaiters_;
  return released;
}

void Mutex::Await(absl::FunctionRef<bool()> condition) {
  AwaitWithTimeout(condition, absl::InfiniteDuration());
}

bool Mutex::AwaitWithTimeout(absl::FunctionRef<bool()> condition,
                             absl::Duration timeout) {
  const absl::Time deadline = timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + timeout;
  // The caller may have changed the guarded state since it took the lock:
  // other awaiters re-check once. Re-waits below change nothing, so they wake
  // no one (two awaiters would otherwise wake each other forever).
  WakeAwaiters();
  while (!condition()) {
    if (!WaitForRelease(deadline)) return condition();
  }
  return true;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  // Releasing the lock here is a release like Unlock: the caller may have
  // changed what threads in Await wait for.
  mu->WakeAwaiters();
  return !WaitUntil(changed_, mu->mu_, deadline);
}

void Notification::Notify() {
  MutexLock lock(&mu_);
  notified_ = true;
}

bool Notification::HasBeenNotified() const {
  MutexLock lock(&mu_);
  return notified_;
}

void Notification::WaitForNotification() const {
  WaitForNotificationWithTimeout(absl::InfiniteDuration());
}

bool Notification::WaitForNotificationWithTimeout(
    absl::Duration timeout) const {
  MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; },
      timeout);
}

}  // namespace dtensor
