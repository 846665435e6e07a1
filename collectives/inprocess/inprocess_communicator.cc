#include "dtensor/collectives/inprocess/inprocess_communicator.h"

#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/promise_work.h"

namespace dtensor {

InProcessCommunicator::InProcessCommunicator(std::vector<int64_t> group_ranks,
                                             int64_t rank,
                                             CommunicatorOptions options,
                                             std::shared_ptr<GroupState> group)
    : Communicator(std::move(group_ranks), rank, std::move(options)),
      group_(std::move(group)) {}

void InProcessCommunicator::WaitIdle() { queues_.WaitIdle(); }

namespace {

using RunFn = absl::Status (*)(const PhaseContext&);

// Fills a collective's posting from its arguments and names the shared
// memory op that runs it (null for a barrier: the exchange is all of it).
struct PostingFiller {
  Posting& p;

  RunFn operator()(const AllGatherArgs& a) const {
    Pieces(a.input, a.output, a.dim, a.sizes);
    return RunAllGather;
  }
  RunFn operator()(const ReduceScatterArgs& a) const {
    Pieces(a.input, a.output, a.dim, a.sizes);
    p.reduce = a.op;
    return RunReduceScatter;
  }
  RunFn operator()(const AllToAllArgs& a) const {
    Pieces(a.input, a.output, a.split_dim, a.send_sizes);
    p.concat_dim = a.concat_dim;
    p.recv_sizes = a.recv_sizes;
    return RunAllToAll;
  }
  RunFn operator()(const BroadcastArgs& a) const {
    p.input = a.tensor;
    p.root = a.root;
    return RunBroadcast;
  }
  // Scatter and gather.
  template <typename Direction>
  RunFn operator()(const RootedPiecesArgs<Direction>& a) const {
    Pieces(a.input, a.output, a.dim, a.sizes);
    p.root = a.root;
    return std::is_same_v<Direction, ScatterDirection> ? RunScatter : RunGather;
  }
  RunFn operator()(const PermuteArgs& a) const {
    p.input = a.input;
    p.output = a.output;
    p.pairs = a.pairs;
    return RunPermute;
  }
  RunFn operator()(const BarrierArgs&) const { return nullptr; }
  // Started elsewhere (StartAllReduce, StartPointToPoint).
  RunFn operator()(const AllReduceArgs&) const { return nullptr; }
  RunFn operator()(const SendArgs&) const { return nullptr; }
  RunFn operator()(const RecvArgs&) const { return nullptr; }

  void Pieces(const Tensor& input, const Tensor& output, int64_t dim,
              const std::vector<int64_t>& sizes) const {
    p.input = input;
    p.output = output;
    p.dim = dim;
    p.sizes = sizes;
  }
};

// The posting of `call` before its arguments: op and signature.
std::shared_ptr<Posting> NewPosting(const CollectiveCall& call) {
  auto posting = std::make_shared<Posting>();
  posting->op = call.op;
  posting->sequence = call.sequence;
  posting->signature = call.signature;
  return posting;
}

}  // namespace

std::shared_ptr<Work> InProcessCommunicator::Start(const CollectiveCall& call) {
  if (std::holds_alternative<AllReduceArgs>(call.args)) {
    return StartAllReduce(call);
  }
  if (IsPointToPoint(call.args)) return StartPointToPoint(call);
  std::shared_ptr<Posting> posting = NewPosting(call);
  const RunFn run = std::visit(PostingFiller{*posting}, call.args);
  return queues_.Submit(call, [this, call, posting = std::move(posting), run] {
    return RunCollective(call, posting, run);
  });
}

WaitContext InProcessCommunicator::StartWait(const CollectiveCall& call) {
  return WaitContext{call.op, call.sequence, call.deadline,
                     absl::Now() + call.deadline};
}

absl::Status InProcessCommunicator::RunCollective(
    const CollectiveCall& call, std::shared_ptr<Posting> posting, RunFn run) {
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

std::shared_ptr<Work> InProcessCommunicator::StartAllReduce(
    const CollectiveCall& call) {
  const AllReduceArgs& args = std::get<AllReduceArgs>(call.args);
  return queues_.Submit(call, [this, tensor = args.tensor, op = args.op, call] {
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

std::shared_ptr<Work> InProcessCommunicator::StartPointToPoint(
    const CollectiveCall& call) {
  if (const auto* send = std::get_if<SendArgs>(&call.args)) {
    return queues_.Submit(
        call, [this, tensor = send->tensor, dst = send->dst, call] {
          return group_->Send(rank(), dst, tensor, StartWait(call));
        });
  }
  const RecvArgs& recv = std::get<RecvArgs>(call.args);
  return queues_.Submit(
      call, [this, tensor = recv.tensor, src = recv.src, call] {
        return group_->Recv(src, rank(), tensor, StartWait(call));
      });
}

}  // namespace dtensor
