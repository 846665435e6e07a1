#include "collectives/gloo/gloo_communicator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "collectives/argument_checks.h"
#include "collectives/gloo/piece_layout.h"
#include "collectives/gloo/tensor_transfer.h"
#include "collectives/promise_work.h"
#include "collectives/reduce_kernel.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/scatter.h"
#include "gloo/types.h"
#include "tensor/dispatch.h"
#include "tensor/elementwise.h"

namespace dtensor {
namespace {

// Slot prefixes of the transfers this backend runs itself, next to Gloo's
// own (0x01 to 0x08, gloo/types.h).
constexpr uint8_t kPointToPointPrefix = 0x40;
constexpr uint8_t kPermutePrefix = 0x41;
constexpr uint8_t kScattervPrefix = 0x42;
constexpr uint8_t kGathervPrefix = 0x43;

// How long a rank whose connection closed gives the store to learn why
// (the peer's posted error, or its exit).
constexpr absl::Duration kCauseGrace = absl::Seconds(2);
constexpr absl::Duration kCausePoll = absl::Milliseconds(5);

TransferSlots SlotsOf(gloo::Slot base) {
  return TransferSlots{base, base + uint8_t{1}, base + uint8_t{2}};
}

bool AllEqual(absl::Span<const int64_t> values) {
  return std::adjacent_find(values.begin(), values.end(),
                            std::not_equal_to<>()) == values.end();
}

uint8_t* Bytes(const Tensor& tensor) {
  return static_cast<uint8_t*>(tensor.raw_data());
}

std::vector<size_t> AsSizes(absl::Span<const int64_t> values) {
  return std::vector<size_t>(values.begin(), values.end());
}

}  // namespace

uint32_t GlooCommunicator::Running::Tag(int phase) const {
  return static_cast<uint32_t>(((call.sequence & 0x3fffffff) << 2) | phase);
}

GlooCommunicator::GlooCommunicator(std::vector<int64_t> group_ranks,
                                   int64_t rank, CommunicatorOptions options,
                                   std::shared_ptr<GlooRuntime> runtime,
                                   std::shared_ptr<gloo::Context> context,
                                   std::string key_prefix)
    : Communicator(std::move(group_ranks), rank, std::move(options)),
      runtime_(std::move(runtime)),
      context_(std::move(context)),
      failures_(*runtime_->session, std::move(key_prefix), this->group_ranks(),
                this->rank()) {}

void GlooCommunicator::WaitIdle() {
  collective_queue_.WaitIdle();
  for (auto& [peer, queue] : send_queues_) queue->WaitIdle();
  for (auto& [peer, queue] : recv_queues_) queue->WaitIdle();
}

std::string GlooCommunicator::Describe(const CollectiveCall& call) const {
  if (call.sequence < 0) return absl::StrCat(call.op, " on ", GroupName());
  return absl::StrCat(call.op, " #", call.sequence, " on ", GroupName());
}

// ---- Running calls ----

std::shared_ptr<Work> GlooCommunicator::Submit(
    const CollectiveCall& call, OpQueue& queue,
    std::function<absl::Status()> run) {
  if (call.blocking && queue.Idle()) return CompletedWork(run());
  return queue.Submit(std::move(run));
}

std::shared_ptr<Work> GlooCommunicator::SubmitCollective(
    const CollectiveCall& call, CallTraffic traffic, Body body) {
  return Submit(
      call, collective_queue_,
      [this, call, traffic = std::move(traffic), body = std::move(body)] {
        return RunCollective(call, traffic, body);
      });
}

std::shared_ptr<Work> GlooCommunicator::SubmitPointToPoint(
    const CollectiveCall& call, int64_t peer, bool sending, Body body) {
  OpQueue& queue = P2pQueue(sending ? send_queues_ : recv_queues_, peer);
  return Submit(call, queue,
                [this, call, peer, sending, body = std::move(body)] {
                  absl::Status broken = Broken();
                  if (!broken.ok()) return broken;
                  const Running running{call, absl::Now() + call.deadline};
                  return RunGuarded(running, body, peer, sending);
                });
}

OpQueue& GlooCommunicator::P2pQueue(
    std::map<int64_t, std::unique_ptr<OpQueue>>& queues, int64_t peer) {
  std::unique_ptr<OpQueue>& queue = queues[peer];
  if (queue == nullptr) queue = std::make_unique<OpQueue>();
  return *queue;
}

absl::Status GlooCommunicator::RunCollective(const CollectiveCall& call,
                                             const CallTraffic& traffic,
                                             const Body& body) {
  DT_RETURN_IF_ERROR(Broken());
  const Running running{call, absl::Now() + call.deadline};
  failures_.arrival().Enter(call.sequence, ArrivalDelay(call.deadline));
  absl::Status status = RunGuarded(
      running,
      [&](const Running& r) -> absl::Status {
        if (options().debug) DT_RETURN_IF_ERROR(CheckCallsAgree(r, traffic));
        return body(r);
      },
      std::nullopt, false);
  failures_.arrival().Leave();
  return status;
}

absl::Status GlooCommunicator::RunGuarded(const Running& running,
                                          const Body& body,
                                          std::optional<int64_t> peer,
                                          bool sending) {
  std::string what;
  try {
    absl::Status status = body(running);
    // Mismatched calls are found by every rank alike, before any data moves
    // (or with the channel drained): the communicator stays usable. Any
    // other error may leave peers waiting for this rank: break.
    if (status.ok() || status.code() == absl::StatusCode::kInvalidArgument) {
      return status;
    }
    return Break(
        absl::Status(status.code(), absl::StrCat(Describe(running.call), ": ",
                                                 status.message())),
        /*post=*/true, peer.has_value());
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  // Another call of this communicator may have broken it meanwhile, closing
  // the connections under this one.
  absl::Status broken = Broken();
  if (!broken.ok()) return broken;
  Failure failure = Diagnose(running, what, peer, sending);
  return Break(std::move(failure.status), /*post=*/!failure.from_peer,
               peer.has_value());
}

absl::Status GlooCommunicator::CheckCallsAgree(const Running& running,
                                               const CallTraffic& traffic) {
  const int64_t n = size();
  std::vector<int64_t> mine =
      EncodeCallRecord(*running.call.signature, traffic, n);
  std::vector<int64_t> all(mine.size() * n);
  {
    gloo::AllgathervOptions opts(context_);
    opts.setInput<int64_t>(mine.data(), mine.size());
    opts.setOutput<int64_t>(all.data(), std::vector<size_t>(n, mine.size()));
    opts.setTag(running.Tag(1));
    opts.setTimeout(GlooTimeout(running.deadline));
    gloo::allgatherv(opts);
  }
  if (!SignaturesDiffer(all, n)) {
    return CheckTraffic(all, group_ranks(), Describe(running.call));
  }
  std::string text = EncodeSignatureText(*running.call.signature);
  const std::vector<int64_t> lengths = SignatureTextLengths(all, n);
  std::string texts(SumOf(lengths), '\0');
  {
    gloo::AllgathervOptions opts(context_);
    opts.setInput<char>(text.data(), text.size());
    opts.setOutput<char>(texts.data(), AsSizes(lengths));
    opts.setTag(running.Tag(2));
    opts.setTimeout(GlooTimeout(running.deadline));
    gloo::allgatherv(opts);
  }
  DT_ASSIGN_OR_RETURN(std::vector<CallSignature> calls,
                      DecodeSignatureTexts(texts, lengths));
  return CheckSameCall(calls, group_ranks());
}

// ---- Failures ----

GlooCommunicator::Failure GlooCommunicator::Diagnose(
    const Running& running, absl::string_view what, std::optional<int64_t> peer,
    bool sending) {
  const std::string name = Describe(running.call);
  const std::string within = absl::FormatDuration(running.call.deadline);
  const char* verb = !peer.has_value() ? "did not arrive"
                     : sending         ? "did not receive"
                                       : "did not send";
  auto missing_error = [&](absl::Span<const int64_t> ranks) {
    return absl::DeadlineExceededError(absl::StrCat(
        name, ": ranks ", RanksText(ranks), " ", verb, " within ", within));
  };
  auto exited_error = [&](absl::Span<const int64_t> ranks) {
    return absl::UnavailableError(
        absl::StrCat(name, ": ranks ", RanksText(ranks), " exited"));
  };
  // A peer that broke the communicator posted why before closing its
  // connections: the first failure explains the others. A send or recv that
  // timed out on the peer's side is reported from this side, naming the
  // peer.
  auto adopt = [&](const GroupFailures::Posted& cause) -> Failure {
    if (peer.has_value() && cause.point_to_point &&
        cause.status.code() == absl::StatusCode::kDeadlineExceeded) {
      return {missing_error({group_ranks()[*peer]}), false};
    }
    return {cause.status, true};
  };
  // Gloo's own timeout; anything else means a connection broke. Then give
  // the store a moment to learn why (a post, or the peer's exit).
  const bool timed_out = absl::StrContains(what, "Timed out");
  const absl::Time give_up = absl::Now() + kCauseGrace;
  while (true) {
    if (std::optional<GroupFailures::Posted> cause = failures_.PeerFailure()) {
      return adopt(*cause);
    }
    const std::vector<int64_t> exited = failures_.ExitedPeers();
    if (!exited.empty()) return {exited_error(exited), false};
    if (timed_out || absl::Now() >= give_up) break;
    absl::SleepFor(kCausePoll);
  }
  if (!timed_out) {
    return {absl::UnavailableError(absl::StrCat(
                name, ": lost the connection to a peer (", what, ")")),
            false};
  }
  const std::vector<int64_t> missing =
      peer.has_value() ? std::vector<int64_t>{group_ranks()[*peer]}
                       : failures_.PeersNotArrived(running.call.sequence);
  if (!missing.empty()) return {missing_error(missing), false};
  return {absl::DeadlineExceededError(
              absl::StrCat(name, ": did not finish within ", within,
                           " although every rank arrived (", what, ")")),
          false};
}

absl::Status GlooCommunicator::Broken() {
  MutexLock lock(&mu_);
  return broken_;
}

absl::Status GlooCommunicator::Break(absl::Status status, bool post,
                                     bool point_to_point) {
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    broken_ = status;
  }
  if (post) failures_.Post(status, point_to_point);
  context_->closeConnections();
  return status;
}

// ---- The operations ----

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const AllReduceArgs& args) {
  const Tensor& tensor = args.tensor;
  const ReduceOp op = args.op;
  if (tensor.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(Tensor buffer, ContiguousInput(tensor));
  const DType dtype = tensor.dtype();
  // Gloo combines two buffers at a time; the average divides the sum after.
  const ReduceOp pairwise = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  gloo::AllreduceOptions opts(context_);
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    opts.setOutput<T>(buffer.data<T>(), buffer.numel());
  });
  opts.setReduceFunction(
      [dtype, pairwise](void* out, const void* a, const void* b, size_t n) {
        const void* inputs[] = {a, b};
        ReduceInto(dtype, pairwise, inputs, out, static_cast<int64_t>(n));
      });
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  gloo::allreduce(opts);
  bool in_place = buffer.storage() == tensor.storage();
  if (op == ReduceOp::kAvg) {
    DT_ASSIGN_OR_RETURN(buffer, Div(buffer, static_cast<double>(size())));
    in_place = false;
  }
  if (in_place) return absl::OkStatus();
  Tensor target = tensor;  // A view: writes go to the caller's elements.
  return target.CopyFrom(buffer);
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const AllGatherArgs& args) {
  const auto& [input, output, dim, sizes] = args;
  const std::vector<int64_t> bytes =
      PieceBytes(output.shape(), dim, sizes, output.dtype());
  if (SumOf(bytes) == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(Tensor sent, ContiguousInput(input));
  const bool direct = PiecesAreRanges(output, dim);
  Tensor packed = output;
  if (!direct) {
    DT_ASSIGN_OR_RETURN(packed,
                        Tensor::Empty({output.numel()}, output.dtype()));
  }
  gloo::AllgathervOptions opts(context_);
  opts.setInput<uint8_t>(Bytes(sent), sent.nbytes());
  opts.setOutput<uint8_t>(Bytes(packed), AsSizes(bytes));
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  gloo::allgatherv(opts);
  if (direct) return absl::OkStatus();
  return UnpackPieces(packed, output, dim, sizes);
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const ReduceScatterArgs& args) {
  const auto& [input, output, dim, op, sizes] = args;
  // Gloo 0.5 has no reduce-scatter with unbound buffers and timeouts: each
  // rank receives its piece of every rank's input with Gloo's alltoallv,
  // then reduces the pieces in rank order (accumulating in double, as the
  // in-process backend does).
  const std::vector<int64_t> bytes =
      PieceBytes(input.shape(), dim, sizes, input.dtype());
  if (SumOf(bytes) == 0) return absl::OkStatus();
  const int64_t n = size();
  const int64_t mine = bytes[rank()];
  DT_ASSIGN_OR_RETURN(Tensor packed, PackPieces(input, dim, sizes));
  DT_ASSIGN_OR_RETURN(Tensor received,
                      Tensor::Empty({n * output.numel()}, input.dtype()));
  gloo::AlltoallvOptions opts(context_);
  opts.setInput<uint8_t>(Bytes(packed), bytes);
  opts.setOutput<uint8_t>(Bytes(received), std::vector<int64_t>(n, mine));
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  gloo::alltoallv(opts);
  if (output.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(OutputStage stage, OutputStage::For(output));
  std::vector<const void*> pieces;
  for (int64_t r = 0; r < n; ++r) pieces.push_back(Bytes(received) + r * mine);
  ReduceInto(output.dtype(), op, pieces, stage.buffer().raw_data(),
             output.numel());
  return stage.Finish();
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const AllToAllArgs& args) {
  const auto& [input, output, split_dim, concat_dim, send_sizes, recv_sizes] =
      args;
  // No early exit when this rank moves nothing: Gloo's alltoallv still
  // exchanges (empty) messages with every peer.
  DT_ASSIGN_OR_RETURN(Tensor packed, PackPieces(input, split_dim, send_sizes));
  const bool direct = PiecesAreRanges(output, concat_dim);
  Tensor received = output;
  if (!direct) {
    DT_ASSIGN_OR_RETURN(received,
                        Tensor::Empty({output.numel()}, output.dtype()));
  }
  gloo::AlltoallvOptions opts(context_);
  opts.setInput<uint8_t>(Bytes(packed), PieceBytes(input.shape(), split_dim,
                                                   send_sizes, input.dtype()));
  opts.setOutput<uint8_t>(
      Bytes(received),
      PieceBytes(output.shape(), concat_dim, recv_sizes, output.dtype()));
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  gloo::alltoallv(opts);
  if (direct) return absl::OkStatus();
  return UnpackPieces(received, output, concat_dim, recv_sizes);
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const BroadcastArgs& args) {
  const auto& [tensor, root] = args;
  if (tensor.numel() == 0) return absl::OkStatus();
  const bool is_root = rank() == root;
  std::optional<OutputStage> stage;
  Tensor buffer;
  if (is_root) {
    DT_ASSIGN_OR_RETURN(buffer, ContiguousInput(tensor));
  } else {
    DT_ASSIGN_OR_RETURN(stage, OutputStage::For(tensor));
    buffer = stage->buffer();
  }
  gloo::BroadcastOptions opts(context_);
  opts.setOutput<uint8_t>(Bytes(buffer), buffer.nbytes());
  opts.setRoot(static_cast<int>(root));
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  gloo::broadcast(opts);
  return is_root ? absl::OkStatus() : stage->Finish();
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const ScatterArgs& args) {
  const auto& [input, output, dim, root, sizes] = args;
  const std::vector<int64_t> bytes =
      PieceBytes(output.shape(), dim, sizes, output.dtype());
  if (SumOf(bytes) == 0) return absl::OkStatus();
  const bool is_root = rank() == root;
  DT_ASSIGN_OR_RETURN(OutputStage stage, OutputStage::For(output));
  Tensor packed;
  if (is_root) {
    DT_ASSIGN_OR_RETURN(packed, PackPieces(input, dim, sizes));
  }
  auto piece = [&](int64_t r) {
    return context_->createUnboundBuffer(Bytes(packed) + OffsetOf(bytes, r),
                                         bytes[r]);
  };
  if (AllEqual(bytes)) {
    gloo::ScatterOptions opts(context_);
    if (is_root) {
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> pieces;
      for (int64_t r = 0; r < size(); ++r) pieces.push_back(piece(r));
      opts.setInputs<uint8_t>(std::move(pieces));
    }
    opts.setOutput<uint8_t>(Bytes(stage.buffer()), bytes[rank()]);
    opts.setRoot(static_cast<int>(root));
    opts.setTag(running.Tag(0));
    opts.setTimeout(GlooTimeout(running.deadline));
    gloo::scatter(opts);
    return stage.Finish();
  }
  // Uneven pieces: Gloo 0.5 has no scatterv; the root sends each piece
  // itself, as gloo::scatter does.
  const uint64_t slot = gloo::Slot::build(kScattervPrefix, running.Tag(0));
  if (is_root) {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends;
    for (int64_t r = 0; r < size(); ++r) {
      if (r == root || bytes[r] == 0) continue;
      sends.push_back(piece(r));
      sends.back()->send(static_cast<int>(r), slot);
    }
    if (bytes[root] > 0) {
      std::memcpy(Bytes(stage.buffer()), Bytes(packed) + OffsetOf(bytes, root),
                  bytes[root]);
    }
    for (auto& send : sends) send->waitSend(GlooTimeout(running.deadline));
  } else if (bytes[rank()] > 0) {
    auto receive =
        context_->createUnboundBuffer(Bytes(stage.buffer()), bytes[rank()]);
    receive->recv(static_cast<int>(root), slot);
    receive->waitRecv(GlooTimeout(running.deadline));
  }
  return stage.Finish();
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const GatherArgs& args) {
  const auto& [input, output, dim, root, sizes] = args;
  const std::vector<int64_t> bytes =
      PieceBytes(input.shape(), dim, sizes, input.dtype());
  if (SumOf(bytes) == 0) return absl::OkStatus();
  const bool is_root = rank() == root;
  DT_ASSIGN_OR_RETURN(Tensor sent, ContiguousInput(input));
  const bool direct = is_root && PiecesAreRanges(output, dim);
  Tensor packed = output;
  if (is_root && !direct) {
    DT_ASSIGN_OR_RETURN(packed,
                        Tensor::Empty({output.numel()}, output.dtype()));
  }
  if (AllEqual(bytes)) {
    gloo::GatherOptions opts(context_);
    opts.setInput<uint8_t>(Bytes(sent), sent.nbytes());
    if (is_root) opts.setOutput<uint8_t>(Bytes(packed), packed.nbytes());
    opts.setRoot(static_cast<int>(root));
    opts.setTag(running.Tag(0));
    opts.setTimeout(GlooTimeout(running.deadline));
    gloo::gather(opts);
  } else {
    // Uneven pieces: Gloo 0.5 has no gatherv; the root receives each piece
    // itself, as gloo::gather does.
    const uint64_t slot = gloo::Slot::build(kGathervPrefix, running.Tag(0));
    if (is_root) {
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives;
      for (int64_t r = 0; r < size(); ++r) {
        if (r == root || bytes[r] == 0) continue;
        receives.push_back(context_->createUnboundBuffer(
            Bytes(packed) + OffsetOf(bytes, r), bytes[r]));
        receives.back()->recv(static_cast<int>(r), slot);
      }
      if (bytes[root] > 0) {
        std::memcpy(Bytes(packed) + OffsetOf(bytes, root), Bytes(sent),
                    bytes[root]);
      }
      for (auto& receive : receives) {
        receive->waitRecv(GlooTimeout(running.deadline));
      }
    } else if (bytes[rank()] > 0) {
      auto send = context_->createUnboundBuffer(Bytes(sent), bytes[rank()]);
      send->send(static_cast<int>(root), slot);
      send->waitSend(GlooTimeout(running.deadline));
    }
  }
  if (!is_root || direct) return absl::OkStatus();
  return UnpackPieces(packed, output, dim, sizes);
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const PermuteArgs& args) {
  const auto& [input, output, pairs] = args;
  const auto [to, from] = PermutePeersOf(pairs, rank());
  if (to == rank()) {
    Tensor target = output;
    return target.CopyFrom(input);
  }
  const TransferSlots slots =
      SlotsOf(gloo::Slot::build(kPermutePrefix, running.Tag(0)));
  const std::string name = Describe(running.call);
  Tensor sent;
  std::optional<OutgoingTransfer> outgoing;
  if (to.has_value()) {
    DT_ASSIGN_OR_RETURN(sent, ContiguousInput(input));
    outgoing.emplace(*context_, static_cast<int>(*to), slots, sent);
  }
  std::optional<OutputStage> stage;
  std::optional<IncomingTransfer> incoming;
  if (from.has_value()) {
    DT_ASSIGN_OR_RETURN(stage, OutputStage::For(output));
    incoming.emplace(*context_, static_cast<int>(*from), slots,
                     stage->buffer());
  }
  // Every send was posted before any wait: a cycle of pairs cannot
  // deadlock.
  absl::Status status;
  if (incoming.has_value()) {
    status = incoming->Finish(
        running.deadline,
        TransferNames{name, group_ranks()[*from], global_rank()});
    if (status.ok()) status = stage->Finish();
  }
  if (outgoing.has_value()) {
    absl::Status sent_status = outgoing->Finish(
        running.deadline,
        TransferNames{name, global_rank(), group_ranks()[*to]});
    if (status.ok()) status = sent_status;
  }
  return status;
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const SendArgs& args) {
  return RunTransfer(running, args.tensor, args.dst, true);
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const RecvArgs& args) {
  return RunTransfer(running, args.tensor, args.src, false);
}

absl::Status GlooCommunicator::RunTransfer(const Running& running,
                                           const Tensor& tensor, int64_t peer,
                                           bool sending) {
  const TransferSlots slots =
      SlotsOf(gloo::Slot::build(kPointToPointPrefix, 0));
  const std::string name = absl::StrCat("send/recv on ", GroupName());
  if (sending) {
    DT_ASSIGN_OR_RETURN(Tensor sent, ContiguousInput(tensor));
    OutgoingTransfer transfer(*context_, static_cast<int>(peer), slots, sent);
    return transfer.Finish(
        running.deadline,
        TransferNames{name, global_rank(), group_ranks()[peer]});
  }
  DT_ASSIGN_OR_RETURN(OutputStage stage, OutputStage::For(tensor));
  IncomingTransfer transfer(*context_, static_cast<int>(peer), slots,
                            stage.buffer());
  DT_RETURN_IF_ERROR(
      transfer.Finish(running.deadline,
                      TransferNames{name, group_ranks()[peer], global_rank()}));
  return stage.Finish();
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const BarrierArgs&) {
  gloo::BarrierOptions opts(context_);
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  gloo::barrier(opts);
  return absl::OkStatus();
}

// ---- Start ----

std::shared_ptr<Work> GlooCommunicator::Start(const CollectiveCall& call) {
  Body body = std::visit(
      [this](const auto& args) -> Body {
        return [this, args](const Running& r) { return RunOp(r, args); };
      },
      call.args);
  if (const auto* send = std::get_if<SendArgs>(&call.args)) {
    return SubmitPointToPoint(call, send->dst, true, std::move(body));
  }
  if (const auto* recv = std::get_if<RecvArgs>(&call.args)) {
    return SubmitPointToPoint(call, recv->src, false, std::move(body));
  }
  // Sends and receives of permute check their shapes themselves
  // (tensor_transfer.h); debug mode compares the other ops' traffic.
  CallTraffic traffic;
  if (options().debug && !std::holds_alternative<PermuteArgs>(call.args)) {
    traffic = TrafficOf(call.args, rank(), size());
  }
  return SubmitCollective(call, std::move(traffic), std::move(body));
}

}  // namespace dtensor
