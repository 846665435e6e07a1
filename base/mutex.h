#ifndef DTENSOR_BASE_MUTEX_H_
#define DTENSOR_BASE_MUTEX_H_

// Locks, condition variables and one-shot notifications with the interface of
// Abseil's (absl::Mutex, absl::CondVar, absl::Notification), built on the C++
// standard library.
//
// Why not Abseil's own: in-process ranks are threads, so data races in the
// collectives, the op engine and autograd are real bugs that ThreadSanitizer
// must see. ThreadSanitizer learns about synchronization only from
// instrumented code or from the pthread calls it intercepts; Debian's Abseil
// is a prebuilt, uninstrumented library whose Mutex synchronizes through its
// own atomics and futexes, invisible to it (every lock-protected access is then
// reported as a race). std::mutex, std::shared_mutex and
// std::condition_variable are pthread calls, which ThreadSanitizer intercepts.

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

namespace dtensor {

// A reader-writer lock. Exclusive holders may wait for a condition on the
// guarded state with Await, which releases the lock while waiting.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes the threads in Await, which re-check their conditions.
  void Unlock() ABSL_UNLOCK_FUNCTION();
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

  // Requires: the calling thread holds the lock exclusively.
  // Blocks until `condition()` (evaluated with the lock held) is true. The
  // condition is re-checked whenever another thread releases the lock.
  void Await(absl::FunctionRef<bool()> condition);
  // As Await, giving up after `timeout`; returns the condition's last value.
  bool AwaitWithTimeout(absl::FunctionRef<bool()> condition,
                        absl::Duration timeout);

 private:
  friend class CondVar;

  // Requires: held exclusively. Waits for the next release of the lock by
  // another thread, or `deadline`; returns false at the deadline.
  bool WaitForRelease(absl::Time deadline);
  // Requires: held exclusively. Wakes the threads in Await.
  void WakeAwaiters();

  std::shared_mutex mu_;
  std::condition_variable_any released_;
  int awaiters_ = 0;  // Guarded by mu_ (exclusive).
};

// Holds `mu` exclusively for its lifetime.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` shared for its lifetime.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable used with a Mutex held exclusively.
class CondVar {
 public:
  // Requires: `mu` held exclusively. Releases it while waiting, reacquires it
  // before returning. Returns true if `deadline` passed (spurious wake-ups
  // return false: callers re-check their condition in a loop).
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline);
  void Wait(Mutex* mu) { WaitWithDeadline(mu, absl::InfiniteFuture()); }
  void Signal() { changed_.notify_one(); }
  void SignalAll() { changed_.notify_all(); }

 private:
  std::condition_variable_any changed_;
};

// A one-shot event: Notify() once; waiters return from then on.
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  // Requires: not yet notified.
  void Notify();
  bool HasBeenNotified() const;
  void WaitForNotification() const;
  // Returns whether the notification came within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const;

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dtensor

#endif  // DTENSOR_BASE_MUTEX_H_
