#ifndef DTENSOR_COLLECTIVES_OP_QUEUE_H_
#define DTENSOR_COLLECTIVES_OP_QUEUE_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/promise_work.h"
#include "dtensor/collectives/work.h"

namespace dtensor {

// Runs a communicator's asynchronous calls one at a time, in the order they
// were submitted, on a worker thread started on the first Submit(). Keeping
// the order is what makes the calls of all ranks pair up. Backend-neutral.
class OpQueue {
 public:
  using Op = std::function<absl::Status()>;

  OpQueue() = default;
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;
  // Runs what is queued to completion (each op ends within its deadline),
  // then stops the worker.
  ~OpQueue();

  // Queues `op`; the returned Work completes with the status `op` returns.
  std::shared_ptr<Work> Submit(Op op);

  // Whether no op is queued or running: then a caller that submits from one
  // thread may run its next op inline without overtaking any.
  bool Idle() const;

  // Blocks until every op submitted so far has run.
  void WaitIdle();

 private:
  struct Item {
    Op op;
    std::shared_ptr<PromiseWork> work;
  };

  void RunWorker();

  mutable Mutex mu_;
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_OP_QUEUE_H_
