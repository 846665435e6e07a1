#include "dtensor/collectives/call_queues.h"

#include <utility>
#include <variant>

#include "dtensor/collectives/promise_work.h"

namespace dtensor {

std::shared_ptr<Work> CallQueues::Submit(const CollectiveCall& call,
                                         OpQueue::Op op) {
  OpQueue& queue = QueueOf(call);
  if (call.blocking && queue.Idle()) return CompletedWork(op());
  return queue.Submit(std::move(op));
}

void CallQueues::WaitIdle() {
  collective_queue_.WaitIdle();
  for (auto& [peer, queue] : send_queues_) queue->WaitIdle();
  for (auto& [peer, queue] : recv_queues_) queue->WaitIdle();
}

OpQueue& CallQueues::QueueOf(const CollectiveCall& call) {
  std::unique_ptr<OpQueue>* queue = nullptr;
  if (const auto* send = std::get_if<SendArgs>(&call.args)) {
    queue = &send_queues_[send->dst];
  } else if (const auto* recv = std::get_if<RecvArgs>(&call.args)) {
    queue = &recv_queues_[recv->src];
  } else {
    return collective_queue_;
  }
  if (*queue == nullptr) *queue = std::make_unique<OpQueue>();
  return **queue;
}

}  // namespace dtensor
