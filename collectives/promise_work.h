#ifndef DTENSOR_COLLECTIVES_PROMISE_WORK_H_
#define DTENSOR_COLLECTIVES_PROMISE_WORK_H_

#include <memory>

#include "absl/status/status.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/work.h"

namespace dtensor {

// A Work that whoever runs the call (a backend's worker thread) completes by
// calling Complete() exactly once.
class PromiseWork final : public Work {
 public:
  absl::Status Wait() override;
  bool IsCompleted() const override;

  // Records the call's status and wakes the waiters.
  void Complete(absl::Status status);

 private:
  Notification done_;
  absl::Status status_;  // Written once, before done_ is notified.
};

// A Work that has already finished with `status`.
std::shared_ptr<Work> CompletedWork(absl::Status status);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_PROMISE_WORK_H_
