// The collectives' bodies on Gloo: each RunOp moves one call's data, with
// Gloo's algorithms where Gloo 0.5 has them and with its unbound buffers
// where it has not (uneven scatter and gather, permute, send and recv).
// Running calls and failure handling are in gloo_communicator.cc.

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/gloo/chain_all_reduce.h"
#include "dtensor/collectives/gloo/gloo_communicator.h"
#include "dtensor/collectives/gloo/piece_layout.h"
#include "dtensor/collectives/gloo/tensor_transfer.h"
#include "dtensor/collectives/multiprocess/piece_geometry.h"
#include "dtensor/collectives/reduce_kernel.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/elementwise.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/scatter.h"
#include "gloo/types.h"

namespace dtensor {
namespace {

// Slot prefixes of the transfers this backend runs itself, next to Gloo's
// own (0x01 to 0x08, gloo/types.h).
constexpr uint8_t kPointToPointPrefix = 0x40;
constexpr uint8_t kPermutePrefix = 0x41;
constexpr uint8_t kScattervPrefix = 0x42;
constexpr uint8_t kGathervPrefix = 0x43;
constexpr uint8_t kChainPartialPrefix = 0x44;
constexpr uint8_t kChainResultPrefix = 0x45;

TransferSlots SlotsOf(gloo::Slot base) {
  return TransferSlots{base, base + uint8_t{1}, base + uint8_t{2}};
}

uint8_t* Bytes(const Tensor& tensor) {
  return static_cast<uint8_t*>(tensor.raw_data());
}

std::vector<size_t> AsSizes(absl::Span<const int64_t> values) {
  return std::vector<size_t>(values.begin(), values.end());
}

// Scatter's (`scatter`) or gather's uneven pieces, which Gloo 0.5 has no
// collective for (no scatterv, no gatherv): as gloo::scatter and
// gloo::gather do, the root sends piece r of `packed` (pieces of `bytes`)
// to rank r, or receives it from rank r, itself, on `slot`; `mine` is this
// rank's piece, which the root copies locally. Throws Gloo's exceptions.
void ExchangeWithRoot(gloo::Context& context, bool scatter, int64_t me,
                      int64_t root, const std::vector<int64_t>& bytes,
                      uint8_t* packed, uint8_t* mine, uint64_t slot,
                      absl::Time deadline) {
  using gloo::transport::UnboundBuffer;
  auto post = [slot](UnboundBuffer& buffer, bool send, int64_t peer) {
    if (send) {
      buffer.send(static_cast<int>(peer), slot);
    } else {
      buffer.recv(static_cast<int>(peer), slot);
    }
  };
  auto wait = [deadline](UnboundBuffer& buffer, bool send) {
    if (send) {
      buffer.waitSend(GlooTimeout(deadline));
    } else {
      buffer.waitRecv(GlooTimeout(deadline));
    }
  };
  if (me != root) {
    if (bytes[me] == 0) return;
    std::unique_ptr<UnboundBuffer> buffer =
        context.createUnboundBuffer(mine, bytes[me]);
    post(*buffer, !scatter, root);
    wait(*buffer, !scatter);
    return;
  }
  std::vector<std::unique_ptr<UnboundBuffer>> pieces;
  for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()); ++r) {
    if (r == root || bytes[r] == 0) continue;
    pieces.push_back(
        context.createUnboundBuffer(packed + OffsetOf(bytes, r), bytes[r]));
    post(*pieces.back(), scatter, r);
  }
  uint8_t* root_piece = packed + OffsetOf(bytes, root);
  if (bytes[root] > 0 && scatter) std::memcpy(mine, root_piece, bytes[root]);
  if (bytes[root] > 0 && !scatter) std::memcpy(root_piece, mine, bytes[root]);
  for (auto& piece : pieces) wait(*piece, scatter);
}

}  // namespace

template <typename GlooOptions>
GlooOptions GlooCommunicator::OptionsFor(const Running& running) const {
  GlooOptions opts(context_);
  opts.setTag(running.Tag(0));
  opts.setTimeout(GlooTimeout(running.deadline));
  return opts;
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const AllReduceArgs& args) {
  if (args.tensor.numel() == 0) return absl::OkStatus();
  return size() <= 2 ? RingAllReduce(running, args)
                     : RankOrderAllReduce(running, args);
}

absl::Status GlooCommunicator::RingAllReduce(const Running& running,
                                             const AllReduceArgs& args) {
  const Tensor& tensor = args.tensor;
  const ReduceOp op = args.op;
  DT_ASSIGN_OR_RETURN(Tensor buffer, ContiguousInput(tensor));
  const DType dtype = tensor.dtype();
  // Gloo combines two buffers at a time; the average divides the sum after
  // (by 2 at most: exact, so the in-process average's bits).
  const ReduceOp pairwise = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  auto opts = OptionsFor<gloo::AllreduceOptions>(running);
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    opts.setOutput<T>(buffer.data<T>(), buffer.numel());
  });
  opts.setReduceFunction(
      [dtype, pairwise](void* out, const void* a, const void* b, size_t n) {
        const void* inputs[] = {a, b};
        ReduceInto(dtype, pairwise, inputs, out, static_cast<int64_t>(n));
      });
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

absl::Status GlooCommunicator::RankOrderAllReduce(const Running& running,
                                                  const AllReduceArgs& args) {
  const Tensor& tensor = args.tensor;
  // Not Gloo's ring: on three or more ranks it adds each chunk starting at a
  // different rank, so its sums differed in the last bits from the
  // in-process backend's, and training over Gloo drifted from the same run
  // on in-process ranks. A chain from rank 0 to the last adds every element
  // in rank order (chain_all_reduce.h): the in-process bits.
  DT_ASSIGN_OR_RETURN(Tensor buffer, ContiguousInput(tensor));
  ChainAllReduce(
      *context_, tensor.dtype(), args.op, buffer.raw_data(), buffer.numel(),
      gloo::Slot::build(kChainPartialPrefix, running.Tag(0)),
      gloo::Slot::build(kChainResultPrefix, running.Tag(0)), running.deadline);
  if (buffer.storage() == tensor.storage()) return absl::OkStatus();
  Tensor target = tensor;  // A view: writes go to the caller's elements.
  return target.CopyFrom(buffer);
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const AllGatherArgs& args) {
  const auto& [input, output, dim, sizes] = args;
  const std::vector<int64_t> bytes = PieceBytes(output, dim, sizes);
  if (SumOf(bytes) == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(Tensor sent, ContiguousInput(input));
  const bool direct = PiecesAreRanges(output, dim);
  DT_ASSIGN_OR_RETURN(Tensor packed, PackedBuffer(output, dim));
  auto opts = OptionsFor<gloo::AllgathervOptions>(running);
  opts.setInput<uint8_t>(Bytes(sent), sent.nbytes());
  opts.setOutput<uint8_t>(Bytes(packed), AsSizes(bytes));
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
  const std::vector<int64_t> bytes = PieceBytes(input, dim, sizes);
  if (SumOf(bytes) == 0) return absl::OkStatus();
  const int64_t n = size();
  const int64_t mine = bytes[rank()];
  DT_ASSIGN_OR_RETURN(Tensor packed, PackPieces(input, dim, sizes));
  DT_ASSIGN_OR_RETURN(Tensor received,
                      Tensor::Empty({n * output.numel()}, input.dtype()));
  auto opts = OptionsFor<gloo::AlltoallvOptions>(running);
  opts.setInput<uint8_t>(Bytes(packed), bytes);
  opts.setOutput<uint8_t>(Bytes(received), std::vector<int64_t>(n, mine));
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
  DT_ASSIGN_OR_RETURN(Tensor received, PackedBuffer(output, concat_dim));
  auto opts = OptionsFor<gloo::AlltoallvOptions>(running);
  opts.setInput<uint8_t>(Bytes(packed),
                         PieceBytes(input, split_dim, send_sizes));
  opts.setOutput<uint8_t>(Bytes(received),
                          PieceBytes(output, concat_dim, recv_sizes));
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
  auto opts = OptionsFor<gloo::BroadcastOptions>(running);
  opts.setOutput<uint8_t>(Bytes(buffer), buffer.nbytes());
  opts.setRoot(static_cast<int>(root));
  gloo::broadcast(opts);
  return is_root ? absl::OkStatus() : stage->Finish();
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const ScatterArgs& args) {
  const auto& [input, output, dim, root, sizes] = args;
  const std::vector<int64_t> bytes = PieceBytes(output, dim, sizes);
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
    auto opts = OptionsFor<gloo::ScatterOptions>(running);
    if (is_root) {
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> pieces;
      for (int64_t r = 0; r < size(); ++r) pieces.push_back(piece(r));
      opts.setInputs<uint8_t>(std::move(pieces));
    }
    opts.setOutput<uint8_t>(Bytes(stage.buffer()), bytes[rank()]);
    opts.setRoot(static_cast<int>(root));
    gloo::scatter(opts);
    return stage.Finish();
  }
  ExchangeWithRoot(*context_, /*scatter=*/true, rank(), root, bytes,
                   Bytes(packed), Bytes(stage.buffer()),
                   gloo::Slot::build(kScattervPrefix, running.Tag(0)),
                   running.deadline);
  return stage.Finish();
}

absl::Status GlooCommunicator::RunOp(const Running& running,
                                     const GatherArgs& args) {
  const auto& [input, output, dim, root, sizes] = args;
  const std::vector<int64_t> bytes = PieceBytes(input, dim, sizes);
  if (SumOf(bytes) == 0) return absl::OkStatus();
  const bool is_root = rank() == root;
  DT_ASSIGN_OR_RETURN(Tensor sent, ContiguousInput(input));
  const bool direct = is_root && PiecesAreRanges(output, dim);
  // Off the root, `output` is undefined and so is `packed`.
  DT_ASSIGN_OR_RETURN(Tensor packed, PackedBuffer(output, dim));
  if (AllEqual(bytes)) {
    auto opts = OptionsFor<gloo::GatherOptions>(running);
    opts.setInput<uint8_t>(Bytes(sent), sent.nbytes());
    if (is_root) opts.setOutput<uint8_t>(Bytes(packed), packed.nbytes());
    opts.setRoot(static_cast<int>(root));
    gloo::gather(opts);
  } else {
    ExchangeWithRoot(*context_, /*scatter=*/false, rank(), root, bytes,
                     Bytes(packed), Bytes(sent),
                     gloo::Slot::build(kGathervPrefix, running.Tag(0)),
                     running.deadline);
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
  auto opts = OptionsFor<gloo::BarrierOptions>(running);
  gloo::barrier(opts);
  return absl::OkStatus();
}

}  // namespace dtensor
