#include "dtensor/collectives/op_queue.h"

#include <utility>

namespace dtensor {

OpQueue::~OpQueue() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<Work> OpQueue::Submit(Op op) {
  auto work = std::make_shared<PromiseWork>();
  MutexLock lock(&mu_);
  items_.push_back(Item{std::move(op), work});
  if (!worker_.joinable()) worker_ = std::thread([this] { RunWorker(); });
  return work;
}

bool OpQueue::Idle() const {
  MutexLock lock(&mu_);
  return items_.empty() && !running_;
}

void OpQueue::WaitIdle() {
  MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return items_.empty() && !running_;
  };
  mu_.Await(idle);
}

void OpQueue::RunWorker() {
  while (true) {
    Item item;
    {
      MutexLock lock(&mu_);
      auto has_work_or_stops = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !items_.empty() || stopping_;
      };
      mu_.Await(has_work_or_stops);
      if (items_.empty()) return;  // Stopping, and nothing left to run.
      item = std::move(items_.front());
      items_.pop_front();
      running_ = true;
    }
    absl::Status status = item.op();
    {
      // Idle before complete: a caller woken by the Work may run inline.
      MutexLock lock(&mu_);
      running_ = false;
    }
    item.work->Complete(std::move(status));
  }
}

}  // namespace dtensor
