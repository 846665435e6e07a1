#include "dtensor/collectives/promise_work.h"

#include <utility>

namespace dtensor {

absl::Status PromiseWork::Wait() {
  done_.WaitForNotification();
  return status_;
}

bool PromiseWork::IsCompleted() const { return done_.HasBeenNotified(); }

void PromiseWork::Complete(absl::Status status) {
  status_ = std::move(status);
  done_.Notify();
}

std::shared_ptr<Work> CompletedWork(absl::Status status) {
  auto work = std::make_shared<PromiseWork>();
  work->Complete(std::move(status));
  return work;
}

}  // namespace dtensor
