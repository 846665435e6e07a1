#include "collectives/inprocess/inprocess_communicator.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/promise_work.h"
#include "base/status_macros.h"

namespace dtensor {

InProcessCommunicator::InProcessCommunicator(std::vector<int64_t> group_ranks,
                                             int64_t rank,
                                             CommunicatorOptions options,
                                             std::shared_ptr<GroupState> group)
    : Communicator(std::move(group_ranks), rank, std::move(options)),
      group_(std::move(group)) {}

void InProcessCommunicator::WaitIdle() {
  collective_queue_.WaitIdle();
  for (auto& [peer, queue] : send_queues_) queue->WaitIdle();
  for (auto& [peer, queue] : recv_queues_) queue->WaitIdle();
}

std::shared_ptr<Work> InProcessCommunicator::Submit(const CallInfo& call,
                                                    OpQueue& queue,
                                                    OpQueue::Op op) {
  if (call.blocking && queue.Idle()) return CompletedWork(op());
  return queue.Submit(std::move(op));
}

std::shared_ptr<Work> InProcessCommunicator::SubmitCollective(
    const CallInfo& call, std::shared_ptr<Posting> posting, RunFn run) {
  return Submit(call, collective_queue_,
                [this, call, posting = std::move(posting), run] {
                  return RunCollective(call, posting, run);
                });
}

WaitContext InProcessCommunicator::StartWait(const CallInfo& call) {
  return WaitContext{call.op, call.sequence, call.deadline,
                     absl::Now() + call.deadline};
}

std::shared_ptr<Posting> InProcessCommunicator::NewPosting(
    const CallInfo& call) {
  auto posting = std::make_shared<Posting>();
  posting->op = call.op;
  posting->sequence = call.sequence;
  posting->signature = call.signature;
  return posting;
}

std::shared_ptr<Posting> InProcessCommunicator::PiecesPosting(
    const CallInfo& call, const Tensor& input, const Tensor& output,
    int64_t dim, std::vector<int64_t> sizes) {
  auto posting = NewPosting(call);
  posting->input = input;
  posting->output = output;
  posting->dim = dim;
  posting->sizes = std::move(sizes);
  return posting;
}

absl::Status InProcessCommunicator::RunCollective(
    const CallInfo& call, std::shared_ptr<Posting> posting, RunFn run) {
  const WaitContext wait = StartWait(call);
  DT_ASSIGN_OR_RETURN(Postings all,
                      group_->Exchange(rank(), std::move(posting), wait));
  DT_RETURN_IF_ERROR(CheckSameCalls(all));
  if (run == nullptr) return absl::OkStatus();
  const std::string name =
      absl::StrCat(all[0]->op, " #", all[0]->sequence, " on ", GroupName());
  auto barrier = [&] { return group_->Arrive(rank(), wait); };
  const PhaseContext context{all, rank(), group_ranks(), name, barrier};
  return run(context);
}

absl::Status InProcessCommunicator::CheckSameCalls(const Postings& all) const {
  if (options().debug) {
    std::vector<CallSignature> calls;
    for (const auto& posting : all) calls.push_back(*posting->signature);
    return CheckSameCall(calls, group_ranks());
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r]->op == all[0]->op) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "mismatched collective calls on ", GroupName(), ": rank ",
        group_ranks()[0], " called ", all[0]->op, " #", all[0]->sequence,
        " but rank ", group_ranks()[r], " called ", all[r]->op, " #",
        all[r]->sequence, " (set ", kCollectivesDebugEnvVar,
        "=1 to compare the arguments too)"));
  }
  return absl::OkStatus();
}

OpQueue& InProcessCommunicator::P2pQueue(
    std::map<int64_t, std::unique_ptr<OpQueue>>& queues, int64_t peer) {
  std::unique_ptr<OpQueue>& queue = queues[peer];
  if (queue == nullptr) queue = std::make_unique<OpQueue>();
  return *queue;
}

std::shared_ptr<Work> InProcessCommunicator::StartAllReduce(
    const Tensor& tensor, ReduceOp op, const CallInfo& call) {
  return Submit(call, collective_queue_, [this, tensor, op, call] {
    // Peers read whole slices of the buffer, so it must be contiguous.
    auto posting = NewPosting(call);
    posting->input = tensor.Contiguous();
    posting->reduce = op;
    if (!posting->input.defined()) {
      return absl::ResourceExhaustedError(
          "all_reduce: no memory for a contiguous copy");
    }
    const Tensor buffer = posting->input;
    DT_RETURN_IF_ERROR(RunCollective(call, std::move(posting), RunAllReduce));
    if (buffer.storage() == tensor.storage()) return absl::OkStatus();
    Tensor target = tensor;  // A view: writes go to the caller's elements.
    return target.CopyFrom(buffer);
  });
}

std::shared_ptr<Work> InProcessCommunicator::StartAllGather(
    const Tensor& input, const Tensor& output, int64_t dim,
    std::vector<int64_t> sizes, const CallInfo& call) {
  return SubmitCollective(
      call, PiecesPosting(call, input, output, dim, std::move(sizes)),
      RunAllGather);
}

std::shared_ptr<Work> InProcessCommunicator::StartReduceScatter(
    const Tensor& input, const Tensor& output, int64_t dim, ReduceOp op,
    std::vector<int64_t> sizes, const CallInfo& call) {
  auto posting = PiecesPosting(call, input, output, dim, std::move(sizes));
  posting->reduce = op;
  return SubmitCollective(call, std::move(posting), RunReduceScatter);
}

std::shared_ptr<Work> InProcessCommunicator::StartAllToAll(
    const Tensor& input, const Tensor& output, int64_t split_dim,
    int64_t concat_dim, std::vector<int64_t> send_sizes,
    std::vector<int64_t> recv_sizes, const CallInfo& call) {
  auto posting =
      PiecesPosting(call, input, output, split_dim, std::move(send_sizes));
  posting->concat_dim = concat_dim;
  posting->recv_sizes = std::move(recv_sizes);
  return SubmitCollective(call, std::move(posting), RunAllToAll);
}

std::shared_ptr<Work> InProcessCommunicator::StartBroadcast(
    const Tensor& tensor, int64_t root, const CallInfo& call) {
  auto posting = NewPosting(call);
  posting->input = tensor;
  posting->root = root;
  return SubmitCollective(call, std::move(posting), RunBroadcast);
}

std::shared_ptr<Work> InProcessCommunicator::StartScatter(
    const Tensor& input, const Tensor& output, int64_t dim, int64_t root,
    std::vector<int64_t> sizes, const CallInfo& call) {
  auto posting = PiecesPosting(call, input, output, dim, std::move(sizes));
  posting->root = root;
  return SubmitCollective(call, std::move(posting), RunScatter);
}

std::shared_ptr<Work> InProcessCommunicator::StartGather(
    const Tensor& input, const Tensor& output, int64_t dim, int64_t root,
    std::vector<int64_t> sizes, const CallInfo& call) {
  auto posting = PiecesPosting(call, input, output, dim, std::move(sizes));
  posting->root = root;
  return SubmitCollective(call, std::move(posting), RunGather);
}

std::shared_ptr<Work> InProcessCommunicator::StartPermute(
    const Tensor& input, const Tensor& output, std::vector<PermutePair> pairs,
    const CallInfo& call) {
  auto posting = NewPosting(call);
  posting->input = input;
  posting->output = output;
  posting->pairs = std::move(pairs);
  return SubmitCollective(call, std::move(posting), RunPermute);
}

std::shared_ptr<Work> InProcessCommunicator::StartBarrier(
    const CallInfo& call) {
  return SubmitCollective(call, NewPosting(call), nullptr);
}

std::shared_ptr<Work> InProcessCommunicator::StartSend(const Tensor& tensor,
                                                       int64_t dst,
                                                       const CallInfo& call) {
  return Submit(call, P2pQueue(send_queues_, dst), [this, tensor, dst, call] {
    return group_->Send(rank(), dst, tensor, StartWait(call));
  });
}

std::shared_ptr<Work> InProcessCommunicator::StartRecv(const Tensor& tensor,
                                                       int64_t src,
                                                       const CallInfo& call) {
  return Submit(call, P2pQueue(recv_queues_, src), [this, tensor, src, call] {
    return group_->Recv(src, rank(), tensor, StartWait(call));
  });
}

}  // namespace dtensor
