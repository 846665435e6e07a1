#ifndef DTENSOR_COLLECTIVES_CALL_QUEUES_H_
#define DTENSOR_COLLECTIVES_CALL_QUEUES_H_

#include <cstdint>
#include <map>
#include <memory>

#include "dtensor/collectives/collective_call.h"
#include "dtensor/collectives/op_queue.h"
#include "dtensor/collectives/work.h"

namespace dtensor {

// Where a communicator runs its calls, in the order each rank must keep: the
// collectives on one queue, the sends to and the receives from each peer on
// a queue of their own (so that a send and a recv in flight together never
// wait on each other). Shared by the backends.
//
// Requires: one thread submits (as a communicator's calls come from one).
class CallQueues {
 public:
  CallQueues() = default;
  CallQueues(const CallQueues&) = delete;
  CallQueues& operator=(const CallQueues&) = delete;

  // Runs `op` for `call` on the calling thread when the call is blocking and
  // its queue is idle (nothing overtaken), else queues it; the Work
  // completes with the status `op` returns.
  std::shared_ptr<Work> Submit(const CollectiveCall& call, OpQueue::Op op);

  // Blocks until every call submitted so far has run.
  void WaitIdle();

 private:
  // The queue of `call`: its peer's and direction's for a send or a recv
  // (made on first use), else the collectives'.
  OpQueue& QueueOf(const CollectiveCall& call);

  // In this order: destroyed first, the collectives' queue finishes first.
  std::map<int64_t, std::unique_ptr<OpQueue>> send_queues_;
  std::map<int64_t, std::unique_ptr<OpQueue>> recv_queues_;
  OpQueue collective_queue_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_CALL_QUEUES_H_
