#ifndef DTENSOR_COLLECTIVES_INPROCESS_INPROCESS_COMMUNICATOR_H_
#define DTENSOR_COLLECTIVES_INPROCESS_INPROCESS_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/collectives/call_queues.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/inprocess/group_state.h"
#include "dtensor/collectives/inprocess/shared_memory_ops.h"

namespace dtensor {

// A Communicator between threads of one process (the ranks of a
// LocalCluster), over shared memory: each rank publishes views of its tensors
// and its peers read them in place (shared_memory_ops.h). CPU tensors only.
//
// Synchronous calls run on the calling thread when nothing is queued.
// Asynchronous collectives run in order on one worker thread; asynchronous
// sends and recvs run on a worker per peer and direction, so that a send and
// a recv in flight together never wait on each other.
class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::vector<int64_t> group_ranks, int64_t rank,
                        CommunicatorOptions options,
                        std::shared_ptr<GroupState> group);

  Device device() const override { return Device::CPU(); }

  // Blocks until every asynchronous call issued so far has finished.
  void WaitIdle();

 protected:
  std::shared_ptr<Work> Start(const CollectiveCall& call) override;

 private:
  using RunFn = absl::Status (*)(const PhaseContext&);

  // All-reduce works on a contiguous buffer its peers read in slices.
  std::shared_ptr<Work> StartAllReduce(const CollectiveCall& call);
  // A send or a recv.
  std::shared_ptr<Work> StartPointToPoint(const CollectiveCall& call);
  // The wait of `call`, starting now.
  static WaitContext StartWait(const CollectiveCall& call);
  // Exchanges postings, checks that every rank made the same call, then
  // runs `run` (null: nothing after the exchange, as for a barrier).
  absl::Status RunCollective(const CollectiveCall& call,
                             std::shared_ptr<Posting> posting, RunFn run);
  // The same op on every rank; in debug mode, the same CallSignature.
  absl::Status CheckSameCalls(const Postings& all) const;

  std::shared_ptr<GroupState> group_;
  // Declared last: destroyed first, so queued calls finish before the rest.
  CallQueues queues_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_INPROCESS_COMMUNICATOR_H_
