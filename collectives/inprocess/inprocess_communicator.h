#ifndef DTENSOR_COLLECTIVES_INPROCESS_INPROCESS_COMMUNICATOR_H_
#define DTENSOR_COLLECTIVES_INPROCESS_INPROCESS_COMMUNICATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "collectives/communicator.h"
#include "collectives/inprocess/group_state.h"
#include "collectives/inprocess/shared_memory_ops.h"
#include "collectives/op_queue.h"

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
  std::shared_ptr<Work> StartAllReduce(const Tensor& tensor, ReduceOp op,
                                       const CallInfo& call) override;
  std::shared_ptr<Work> StartAllGather(const Tensor& input,
                                       const Tensor& output, int64_t dim,
                                       std::vector<int64_t> sizes,
                                       const CallInfo& call) override;
  std::shared_ptr<Work> StartReduceScatter(const Tensor& input,
                                           const Tensor& output, int64_t dim,
                                           ReduceOp op,
                                           std::vector<int64_t> sizes,
                                           const CallInfo& call) override;
  std::shared_ptr<Work> StartAllToAll(const Tensor& input, const Tensor& output,
                                      int64_t split_dim, int64_t concat_dim,
                                      std::vector<int64_t> send_sizes,
                                      std::vector<int64_t> recv_sizes,
                                      const CallInfo& call) override;
  std::shared_ptr<Work> StartBroadcast(const Tensor& tensor, int64_t root,
                                       const CallInfo& call) override;
  std::shared_ptr<Work> StartScatter(const Tensor& input, const Tensor& output,
                                     int64_t dim, int64_t root,
                                     std::vector<int64_t> sizes,
                                     const CallInfo& call) override;
  std::shared_ptr<Work> StartGather(const Tensor& input, const Tensor& output,
                                    int64_t dim, int64_t root,
                                    std::vector<int64_t> sizes,
                                    const CallInfo& call) override;
  std::shared_ptr<Work> StartPermute(const Tensor& input, const Tensor& output,
                                     std::vector<PermutePair> pairs,
                                     const CallInfo& call) override;
  std::shared_ptr<Work> StartBarrier(const CallInfo& call) override;
  std::shared_ptr<Work> StartSend(const Tensor& tensor, int64_t dst,
                                  const CallInfo& call) override;
  std::shared_ptr<Work> StartRecv(const Tensor& tensor, int64_t src,
                                  const CallInfo& call) override;

 private:
  using RunFn = absl::Status (*)(const PhaseContext&);

  // Runs `op` inline (a blocking call with `queue` idle) or on `queue`.
  static std::shared_ptr<Work> Submit(const CallInfo& call, OpQueue& queue,
                                      OpQueue::Op op);
  // Submits RunCollective(call, posting, run) to the collective queue.
  std::shared_ptr<Work> SubmitCollective(const CallInfo& call,
                                         std::shared_ptr<Posting> posting,
                                         RunFn run);
  // The wait of `call`, starting now.
  static WaitContext StartWait(const CallInfo& call);
  // The posting of a new collective call, with its op and signature.
  static std::shared_ptr<Posting> NewPosting(const CallInfo& call);
  // The same, for an op on pieces of `sizes` along `dim` of `input` or
  // `output` (all_gather, reduce_scatter, scatter, gather; all_to_all with
  // its split dim and send sizes).
  static std::shared_ptr<Posting> PiecesPosting(const CallInfo& call,
                                                const Tensor& input,
                                                const Tensor& output,
                                                int64_t dim,
                                                std::vector<int64_t> sizes);
  // Exchanges postings, checks that every rank made the same call, then
  // runs `run` (null: nothing after the exchange, as for a barrier).
  absl::Status RunCollective(const CallInfo& call,
                             std::shared_ptr<Posting> posting, RunFn run);
  // The same op on every rank; in debug mode, the same CallSignature.
  absl::Status CheckSameCalls(const Postings& all) const;
  // The queue of sends to / recvs from `peer`, made on first use.
  OpQueue& P2pQueue(std::map<int64_t, std::unique_ptr<OpQueue>>& queues,
                    int64_t peer);

  std::shared_ptr<GroupState> group_;
  // Declared last: destroyed first, so queued calls finish before the rest.
  std::map<int64_t, std::unique_ptr<OpQueue>> send_queues_;
  std::map<int64_t, std::unique_ptr<OpQueue>> recv_queues_;
  OpQueue collective_queue_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_INPROCESS_COMMUNICATOR_H_
