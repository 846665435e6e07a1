#ifndef DTENSOR_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
#define DTENSOR_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/call_queues.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/multiprocess/call_records.h"
#include "dtensor/collectives/multiprocess/group_failures.h"
#include "dtensor/collectives/multiprocess/rendezvous_session.h"
#include "dtensor/collectives/nccl/nccl_channel.h"

namespace dtensor {

// What one process's NCCL backend and its communicators share.
struct NcclRuntime : MultiprocessRuntime {
  // The CUDA device of this rank.
  int device = 0;
};

// A Communicator between processes over NCCL, on CUDA tensors of one device
// (nccl_backend.h has the contract). Calls are enqueued on the calling
// thread; their Work polls the GPU until it has finished them, the deadline
// passes (the communicator is then aborted and broken), NCCL reports an
// error, or a peer posts in the store that it broke the communicator.
class NcclCommunicator final
    : public Communicator,
      public std::enable_shared_from_this<NcclCommunicator> {
 public:
  NcclCommunicator(std::vector<int64_t> group_ranks, int64_t rank,
                   CommunicatorOptions options,
                   std::shared_ptr<NcclRuntime> runtime,
                   std::unique_ptr<NcclChannel> channel,
                   std::string key_prefix);

  Device device() const override { return Device::CUDA(runtime_->device); }

 protected:
  std::shared_ptr<Work> Start(const CollectiveCall& call) override;

 private:
  friend class NcclWork;

  // Makes the NCCL (and copy) calls of one operation on `stream`.
  using Enqueue = std::function<absl::Status(ncclComm_t, cudaStream_t)>;

  // A call on its way: what its Work needs to wait for it.
  struct Launched {
    CollectiveCall call;
    absl::Time deadline;
    NcclChannel* channel;
    std::optional<int64_t> peer;  // The other side of a send or recv.
    bool sending = false;
  };

  // An operation ready to enqueue: the tensors the GPU uses until it has
  // finished (arguments and staging buffers), and its calls.
  struct Prepared {
    std::vector<Tensor> keep;
    Enqueue enqueue;
  };
  // Each collective's staging buffers and calls (nccl_collectives.cc).
  absl::StatusOr<Prepared> Prepare(const AllReduceArgs& args) const;
  absl::StatusOr<Prepared> Prepare(const AllGatherArgs& args) const;
  absl::StatusOr<Prepared> Prepare(const ReduceScatterArgs& args) const;
  absl::StatusOr<Prepared> Prepare(const AllToAllArgs& args) const;
  absl::StatusOr<Prepared> Prepare(const BroadcastArgs& args) const;
  // Scatter and gather, mirror images of each other, share one body.
  template <typename Direction>
  absl::StatusOr<Prepared> Prepare(
      const RootedPiecesArgs<Direction>& args) const;
  absl::StatusOr<Prepared> Prepare(const PermuteArgs& args) const;
  absl::StatusOr<Prepared> Prepare(const BarrierArgs& args) const;
  // A send (`sending`) or a receive on a two-rank channel.
  static absl::StatusOr<Prepared> PrepareTransfer(const Tensor& tensor,
                                                  bool sending);

  // Enqueues a collective (after the debug check) on the main channel.
  std::shared_ptr<Work> LaunchCollective(const CollectiveCall& call);
  std::shared_ptr<Work> Launch(Launched launched, std::vector<Tensor> keep,
                               const Enqueue& enqueue);
  // Waits for a launched call whose GPU work ends with `done`: polls the
  // event, the group's and NCCL's errors, the peers (every kPeerCheck) and
  // the deadline.
  absl::Status Await(const Launched& launched, cudaEvent_t done);
  // The timeout error naming `ranks`, which did not take part in time.
  absl::Status MissingRanks(const Launched& launched,
                            absl::Span<const int64_t> ranks) const;
  // A peer's posted failure or exit, as this rank's error (breaking the
  // communicator); OK when there is none.
  absl::Status CheckPeers(const Launched& launched);
  // The error of a call past its deadline, naming the ranks that did not
  // arrive (breaking the communicator).
  absl::Status DeadlineError(const Launched& launched);
  // Debug mode: every rank made the same call, moving matching bytes
  // (compared through the store).
  absl::Status CheckCallsAgree(const CollectiveCall& call, absl::Time deadline);
  // The two-rank channel of sends from member `src` to member `dst`, made
  // on first use by both.
  absl::StatusOr<NcclChannel*> PointToPointChannel(int64_t src, int64_t dst,
                                                   absl::Time deadline);
  // A send to or receive from `peer`, to its end. Runs on the queue of its
  // peer and direction: making a channel waits for the peer to make it too,
  // which must not hold up the caller's other calls.
  absl::Status RunPointToPoint(const CollectiveCall& call, const Tensor& tensor,
                               int64_t peer, bool sending);
  std::shared_ptr<Work> SubmitPointToPoint(const CollectiveCall& call,
                                           const Tensor& tensor, int64_t peer,
                                           bool sending);

  // Breaks the communicator (GroupFailures::Break) and, on the first break,
  // aborts every channel.
  absl::Status Break(absl::Status status, bool post, bool point_to_point);

  const std::shared_ptr<NcclRuntime> runtime_;
  const std::unique_ptr<NcclChannel> channel_;
  const std::string key_prefix_;
  GroupFailures failures_;
  // Held while a channel is made, which may wait for the peer.
  Mutex channels_mu_;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<NcclChannel>>
      point_to_point_ ABSL_GUARDED_BY(channels_mu_);
  // Declared last: destroyed first, so queued sends and receives finish
  // before the rest. (Collectives are enqueued on the calling thread.)
  CallQueues queues_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
