#ifndef DTENSOR_COLLECTIVES_GLOO_GLOO_COMMUNICATOR_H_
#define DTENSOR_COLLECTIVES_GLOO_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dtensor/collectives/call_queues.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/gloo/gloo_runtime.h"
#include "dtensor/collectives/multiprocess/call_records.h"
#include "dtensor/collectives/multiprocess/group_failures.h"
#include "gloo/context.h"

namespace dtensor {

// A Communicator between processes over Gloo (TCP): one Gloo context (a
// connection to every other member) per communicator, and Gloo's own
// algorithms for the collectives. CPU tensors.
//
// Each call runs Gloo with the call's deadline as its timeout. On a failure
// the communicator breaks: it posts its error to the store and closes its
// connections, so that peers blocked on it fail at once and report the same
// error (a peer that finds its connection closed adopts the error its
// closer posted). The messages name the call, the group and, where the store
// knows them, the ranks that exited or never arrived (ArrivalBoard).
//
// Synchronous calls run on the calling thread when nothing is queued;
// asynchronous collectives run in order on one worker thread, sends and
// recvs on a worker per peer and direction.
//
// Without debug mode the peers' shapes are trusted, as NCCL and torch's
// Gloo backend trust them: mismatched shapes can make Gloo abort the
// process. Debug mode checks every collective's signature and the bytes it
// moves between each pair of ranks first. Sends, recvs and permutes always
// check shapes (tensor_transfer.h).
class GlooCommunicator final : public Communicator {
 public:
  // `context` is connected; its rank is `rank`. Store keys of this
  // communicator start with `key_prefix`.
  GlooCommunicator(std::vector<int64_t> group_ranks, int64_t rank,
                   CommunicatorOptions options,
                   std::shared_ptr<GlooRuntime> runtime,
                   std::shared_ptr<gloo::Context> context,
                   std::string key_prefix);

  Device device() const override { return Device::CPU(); }

  // Blocks until every asynchronous call issued so far has finished.
  void WaitIdle();

 protected:
  std::shared_ptr<Work> Start(const CollectiveCall& call) override;

 private:
  // Why a call failed, and whether the error is a peer's (adopted from the
  // store) rather than this rank's own.
  struct Failure {
    absl::Status status;
    bool from_peer;
  };
  // A call while it runs: its deadline and its Gloo tags.
  struct Running {
    const CollectiveCall& call;
    absl::Time deadline;
    // The Gloo tag of the call's `phase` (0: the op; 1, 2: debug checks):
    // distinct per collective, so that no two calls' messages can match,
    // and for the op distinct per size where the ranks agree on it.
    uint32_t Tag(int phase) const;
  };
  // Runs one call on the context. May throw Gloo's exceptions; statuses it
  // returns are the call's own errors.
  using Body = std::function<absl::Status(const Running&)>;

  std::shared_ptr<Work> SubmitCollective(const CollectiveCall& call,
                                         CallTraffic traffic, Body body);
  // `peer` is the group rank sent to (`sending`) or received from.
  std::shared_ptr<Work> SubmitPointToPoint(const CollectiveCall& call,
                                           int64_t peer, bool sending,
                                           Body body);

  absl::Status RunCollective(const CollectiveCall& call,
                             const CallTraffic& traffic, const Body& body);
  // Runs `body`, turning exceptions into diagnosed errors that break the
  // communicator. `peer`: the other side of a send or recv.
  absl::Status RunGuarded(const Running& running, const Body& body,
                          std::optional<int64_t> peer, bool sending);
  // Debug mode: every rank made the same call, moving matching bytes.
  absl::Status CheckCallsAgree(const Running& running,
                               const CallTraffic& traffic);
  // Why the call failed with Gloo's `what`.
  Failure Diagnose(const Running& running, absl::string_view what,
                   std::optional<int64_t> peer, bool sending);

  // Breaks the communicator (GroupFailures::Break) and, on the first break,
  // closes the connections.
  absl::Status Break(absl::Status status, bool post, bool point_to_point);

  // Gloo's options of type `GlooOptions` (gloo::AllreduceOptions, ...) on
  // this communicator's context, tagged for `running`'s op and timing out at
  // its deadline.
  template <typename GlooOptions>
  GlooOptions OptionsFor(const Running& running) const;

  // The ops, run by Start on the queues (gloo_collectives.cc).
  absl::Status RunOp(const Running& running, const AllReduceArgs& args);
  // all_reduce on one or two ranks: Gloo's ring, whose sums are the rank-order
  // sums there (a + b in either order); on more, a chain in rank order
  // (chain_all_reduce.h; gloo_collectives.cc says why).
  absl::Status RingAllReduce(const Running& running, const AllReduceArgs& args);
  absl::Status RankOrderAllReduce(const Running& running,
                                  const AllReduceArgs& args);
  absl::Status RunOp(const Running& running, const AllGatherArgs& args);
  absl::Status RunOp(const Running& running, const ReduceScatterArgs& args);
  absl::Status RunOp(const Running& running, const AllToAllArgs& args);
  absl::Status RunOp(const Running& running, const BroadcastArgs& args);
  absl::Status RunOp(const Running& running, const ScatterArgs& args);
  absl::Status RunOp(const Running& running, const GatherArgs& args);
  absl::Status RunOp(const Running& running, const PermuteArgs& args);
  absl::Status RunOp(const Running& running, const BarrierArgs& args);
  absl::Status RunOp(const Running& running, const SendArgs& args);
  absl::Status RunOp(const Running& running, const RecvArgs& args);
  // A send to (`sending`) or a receive from group rank `peer`.
  absl::Status RunTransfer(const Running& running, const Tensor& tensor,
                           int64_t peer, bool sending);

  const std::shared_ptr<GlooRuntime> runtime_;
  const std::shared_ptr<gloo::Context> context_;
  GroupFailures failures_;
  // Declared last: destroyed first, so queued calls finish before the rest.
  CallQueues queues_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_GLOO_COMMUNICATOR_H_
