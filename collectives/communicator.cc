#include "collectives/communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/argument_checks.h"
#include "collectives/promise_work.h"
#include "base/status_macros.h"

namespace dtensor {
namespace {

using WorkOrError = absl::StatusOr<std::shared_ptr<Work>>;

// The sync form: the status of an argument error, else of the finished call.
absl::Status Await(WorkOrError work) {
  if (!work.ok()) return work.status();
  return (*work)->Wait();
}

// The async form: argument errors come back as an already finished Work.
std::shared_ptr<Work> AsWork(WorkOrError work) {
  if (!work.ok()) return CompletedWork(work.status());
  return *std::move(work);
}

std::string SizesText(absl::Span<const int64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

std::string PairsText(absl::Span<const PermutePair> pairs) {
  return absl::StrCat(
      "[",
      absl::StrJoin(pairs, ", ",
                    [](std::string* out, const PermutePair& pair) {
                      absl::StrAppend(out, pair.src, "->", pair.dst);
                    }),
      "]");
}

// The pairs are in range and no rank sends or receives twice.
absl::Status CheckPermutePairs(absl::Span<const PermutePair> pairs,
                               int64_t size, absl::string_view op) {
  std::vector<bool> sends(size, false);
  std::vector<bool> receives(size, false);
  for (const PermutePair& pair : pairs) {
    DT_RETURN_IF_ERROR(CheckGroupRank(pair.src, size, "src", op));
    DT_RETURN_IF_ERROR(CheckGroupRank(pair.dst, size, "dst", op));
    if (sends[pair.src] || receives[pair.dst]) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": rank ", sends[pair.src] ? pair.src : pair.dst,
                       " ", sends[pair.src] ? "sends" : "receives",
                       " more than once in ", PairsText(pairs)));
    }
    sends[pair.src] = true;
    receives[pair.dst] = true;
  }
  return absl::OkStatus();
}

}  // namespace

Communicator::Communicator(std::vector<int64_t> group_ranks, int64_t rank,
                           CommunicatorOptions options)
    : group_ranks_(std::move(group_ranks)),
      rank_(rank),
      options_(std::move(options)) {}

std::string Communicator::GroupName() const {
  return absl::StrCat("group ", SizesText(group_ranks_));
}

absl::StatusOr<Communicator::CallInfo> Communicator::NewCall(
    absl::string_view op, const CollectiveOptions& options, bool blocking,
    bool collective) {
  CallInfo call;
  call.op = op;
  call.deadline = options.deadline.value_or(options_.DeadlineOrDefault());
  if (call.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the deadline must be positive, got ",
                     absl::FormatDuration(call.deadline)));
  }
  call.blocking = blocking;
  if (collective) call.sequence = next_sequence_++;
  return call;
}

CallSignature Communicator::Sign(const CallInfo& call, std::string key,
                                 absl::string_view args) {
  CallSignature signature;
  signature.op = std::string(call.op);
  signature.key = std::move(key);
  signature.text =
      call.sequence >= 0
          ? absl::StrCat(call.op, " #", call.sequence, " (", args, ")")
          : absl::StrCat(call.op, " (", args, ")");
  return signature;
}

// ---- all_reduce ----

WorkOrError Communicator::IssueAllReduce(const Tensor& tensor, ReduceOp op,
                                         const CollectiveOptions& options,
                                         bool blocking) {
  constexpr absl::string_view kOp = "all_reduce";
  DT_RETURN_IF_ERROR(CheckTensor(tensor, "tensor", device(), kOp));
  DT_RETURN_IF_ERROR(CheckReduceDType(op, tensor.dtype(), kOp));
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature = Sign(
        call, absl::StrCat("op=", ReduceOpName(op), " ", TensorText(tensor)),
        absl::StrCat("op=", ReduceOpName(op), ", tensor=", TensorText(tensor)));
  }
  return StartAllReduce(tensor, op, call);
}

absl::Status Communicator::AllReduce(const Tensor& tensor, ReduceOp op,
                                     const CollectiveOptions& options) {
  return Await(IssueAllReduce(tensor, op, options, true));
}

std::shared_ptr<Work> Communicator::AllReduceAsync(
    const Tensor& tensor, ReduceOp op, const CollectiveOptions& options) {
  return AsWork(IssueAllReduce(tensor, op, options, false));
}

// ---- all_gather ----

WorkOrError Communicator::IssueAllGather(const Tensor& input,
                                         const Tensor& output, int64_t dim,
                                         absl::Span<const int64_t> sizes,
                                         const CollectiveOptions& options,
                                         bool blocking) {
  constexpr absl::string_view kOp = "all_gather";
  DT_RETURN_IF_ERROR(CheckTensor(input, "input", device(), kOp));
  DT_RETURN_IF_ERROR(CheckTensor(output, "output", device(), kOp));
  DT_RETURN_IF_ERROR(CheckSameDType(input, output, kOp));
  DT_ASSIGN_OR_RETURN(dim, NormalizeCollectiveDim(dim, input.dim(), kOp));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> all_sizes,
                      CompletePieceSizes(sizes, size(), input.size(dim), kOp));
  if (all_sizes[rank_] != input.size(dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": sizes ", SizesText(all_sizes), " give rank ", rank_, " size ",
        all_sizes[rank_], " but its input ", TensorText(input), " has ",
        input.size(dim), " along dim ", dim));
  }
  DT_RETURN_IF_ERROR(
      CheckShape(output, WithDimSize(input.shape(), dim, SumOf(all_sizes)),
                 "output", kOp));
  DT_RETURN_IF_ERROR(CheckDisjoint(input, output, kOp));
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature =
        Sign(call,
             absl::StrCat("dim=", dim, " sizes=", SizesText(all_sizes), " ",
                          TensorText(output)),
             absl::StrCat("dim=", dim, ", sizes=", SizesText(all_sizes),
                          ", input=", TensorText(input),
                          ", output=", TensorText(output)));
  }
  return StartAllGather(input, output, dim, std::move(all_sizes), call);
}

absl::Status Communicator::AllGather(const Tensor& input, const Tensor& output,
                                     int64_t dim,
                                     absl::Span<const int64_t> sizes,
                                     const CollectiveOptions& options) {
  return Await(IssueAllGather(input, output, dim, sizes, options, true));
}

std::shared_ptr<Work> Communicator::AllGatherAsync(
    const Tensor& input, const Tensor& output, int64_t dim,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return AsWork(IssueAllGather(input, output, dim, sizes, options, false));
}

// ---- reduce_scatter ----

WorkOrError Communicator::IssueReduceScatter(const Tensor& input,
                                             const Tensor& output, int64_t dim,
                                             ReduceOp op,
                                             absl::Span<const int64_t> sizes,
                                             const CollectiveOptions& options,
                                             bool blocking) {
  constexpr absl::string_view kOp = "reduce_scatter";
  DT_RETURN_IF_ERROR(CheckTensor(input, "input", device(), kOp));
  DT_RETURN_IF_ERROR(CheckTensor(output, "output", device(), kOp));
  DT_RETURN_IF_ERROR(CheckSameDType(input, output, kOp));
  DT_RETURN_IF_ERROR(CheckReduceDType(op, input.dtype(), kOp));
  DT_ASSIGN_OR_RETURN(dim, NormalizeCollectiveDim(dim, input.dim(), kOp));
  std::vector<int64_t> all_sizes;
  if (sizes.empty()) {
    DT_ASSIGN_OR_RETURN(all_sizes,
                        EqualPieceSizes(input.size(dim), size(), kOp));
  } else {
    DT_ASSIGN_OR_RETURN(all_sizes, CompletePieceSizes(sizes, size(), 0, kOp));
  }
  if (SumOf(all_sizes) != input.size(dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": sizes ", SizesText(all_sizes), " do not add up to size ",
        input.size(dim), " of dim ", dim, " of input ", TensorText(input)));
  }
  DT_RETURN_IF_ERROR(
      CheckShape(output, WithDimSize(input.shape(), dim, all_sizes[rank_]),
                 "output", kOp));
  DT_RETURN_IF_ERROR(CheckDisjoint(input, output, kOp));
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature = Sign(
        call,
        absl::StrCat("dim=", dim, " op=", ReduceOpName(op),
                     " sizes=", SizesText(all_sizes), " ", TensorText(input)),
        absl::StrCat("dim=", dim, ", op=", ReduceOpName(op), ", sizes=",
                     SizesText(all_sizes), ", input=", TensorText(input),
                     ", output=", TensorText(output)));
  }
  return StartReduceScatter(input, output, dim, op, std::move(all_sizes), call);
}

absl::Status Communicator::ReduceScatter(const Tensor& input,
                                         const Tensor& output, int64_t dim,
                                         ReduceOp op,
                                         absl::Span<const int64_t> sizes,
                                         const CollectiveOptions& options) {
  return Await(
      IssueReduceScatter(input, output, dim, op, sizes, options, true));
}

std::shared_ptr<Work> Communicator::ReduceScatterAsync(
    const Tensor& input, const Tensor& output, int64_t dim, ReduceOp op,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return AsWork(
      IssueReduceScatter(input, output, dim, op, sizes, options, false));
}

// ---- all_to_all ----

WorkOrError Communicator::IssueAllToAll(const Tensor& input,
                                        const Tensor& output, int64_t split_dim,
                                        int64_t concat_dim,
                                        absl::Span<const int64_t> send_sizes,
                                        absl::Span<const int64_t> recv_sizes,
                                        const CollectiveOptions& options,
                                        bool blocking) {
  constexpr absl::string_view kOp = "all_to_all";
  DT_RETURN_IF_ERROR(CheckTensor(input, "input", device(), kOp));
  DT_RETURN_IF_ERROR(CheckTensor(output, "output", device(), kOp));
  DT_RETURN_IF_ERROR(CheckSameDType(input, output, kOp));
  DT_ASSIGN_OR_RETURN(split_dim,
                      NormalizeCollectiveDim(split_dim, input.dim(), kOp));
  DT_ASSIGN_OR_RETURN(concat_dim,
                      NormalizeCollectiveDim(concat_dim, input.dim(), kOp));
  if (output.dim() != input.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": output ", TensorText(output), " and input ",
                     TensorText(input), " differ in rank"));
  }
  std::vector<int64_t> sends;
  std::vector<int64_t> receives;
  if (send_sizes.empty()) {
    DT_ASSIGN_OR_RETURN(sends,
                        EqualPieceSizes(input.size(split_dim), size(), kOp));
  } else {
    DT_ASSIGN_OR_RETURN(sends, CompletePieceSizes(send_sizes, size(), 0, kOp));
  }
  if (recv_sizes.empty()) {
    DT_ASSIGN_OR_RETURN(receives,
                        EqualPieceSizes(output.size(concat_dim), size(), kOp));
  } else {
    DT_ASSIGN_OR_RETURN(receives,
                        CompletePieceSizes(recv_sizes, size(), 0, kOp));
  }
  if (SumOf(sends) != input.size(split_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": send sizes ", SizesText(sends), " do not add up to size ",
        input.size(split_dim), " of split dim ", split_dim, " of input ",
        TensorText(input)));
  }
  if (SumOf(receives) != output.size(concat_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": recv sizes ", SizesText(receives), " do not add up to size ",
        output.size(concat_dim), " of concat dim ", concat_dim, " of output ",
        TensorText(output)));
  }
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != split_dim && d != concat_dim && input.size(d) != output.size(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": input ", TensorText(input), " and output ",
                       TensorText(output), " differ in dim ", d,
                       ", which is neither the split nor the concat dim"));
    }
  }
  DT_RETURN_IF_ERROR(CheckDisjoint(input, output, kOp));
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature =
        Sign(call,
             absl::StrCat("split_dim=", split_dim, " concat_dim=", concat_dim,
                          " dtype=", std::string(DTypeName(input.dtype()))),
             absl::StrCat("split_dim=", split_dim, ", concat_dim=", concat_dim,
                          ", send_sizes=", SizesText(sends), ", recv_sizes=",
                          SizesText(receives), ", input=", TensorText(input),
                          ", output=", TensorText(output)));
  }
  return StartAllToAll(input, output, split_dim, concat_dim, std::move(sends),
                       std::move(receives), call);
}

absl::Status Communicator::AllToAll(const Tensor& input, const Tensor& output,
                                    int64_t split_dim, int64_t concat_dim,
                                    absl::Span<const int64_t> send_sizes,
                                    absl::Span<const int64_t> recv_sizes,
                                    const CollectiveOptions& options) {
  return Await(IssueAllToAll(input, output, split_dim, concat_dim, send_sizes,
                             recv_sizes, options, true));
}

std::shared_ptr<Work> Communicator::AllToAllAsync(
    const Tensor& input, const Tensor& output, int64_t split_dim,
    int64_t concat_dim, absl::Span<const int64_t> send_sizes,
    absl::Span<const int64_t> recv_sizes, const CollectiveOptions& options) {
  return AsWork(IssueAllToAll(input, output, split_dim, concat_dim, send_sizes,
                              recv_sizes, options, false));
}

// ---- broadcast ----

WorkOrError Communicator::IssueBroadcast(const Tensor& tensor, int64_t root,
                                         const CollectiveOptions& options,
                                         bool blocking) {
  constexpr absl::string_view kOp = "broadcast";
  DT_RETURN_IF_ERROR(CheckTensor(tensor, "tensor", device(), kOp));
  DT_RETURN_IF_ERROR(CheckGroupRank(root, size(), "root", kOp));
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature =
        Sign(call, absl::StrCat("root=", root, " ", TensorText(tensor)),
             absl::StrCat("root=", root, ", tensor=", TensorText(tensor)));
  }
  return StartBroadcast(tensor, root, call);
}

absl::Status Communicator::Broadcast(const Tensor& tensor, int64_t root,
                                     const CollectiveOptions& options) {
  return Await(IssueBroadcast(tensor, root, options, true));
}

std::shared_ptr<Work> Communicator::BroadcastAsync(
    const Tensor& tensor, int64_t root, const CollectiveOptions& options) {
  return AsWork(IssueBroadcast(tensor, root, options, false));
}

// ---- scatter ----

absl::StatusOr<Communicator::RootedPieces> Communicator::CheckRootedPieces(
    absl::string_view op, const Tensor& input, const Tensor& output,
    bool piece_is_output, int64_t dim, int64_t root,
    absl::Span<const int64_t> sizes) const {
  const Tensor& piece = piece_is_output ? output : input;
  const Tensor& whole = piece_is_output ? input : output;
  const char* piece_name = piece_is_output ? "output" : "input";
  const char* whole_name = piece_is_output ? "input" : "output";
  DT_RETURN_IF_ERROR(CheckGroupRank(root, size(), "root", op));
  DT_RETURN_IF_ERROR(CheckTensor(piece, piece_name, device(), op));
  DT_ASSIGN_OR_RETURN(dim, NormalizeCollectiveDim(dim, piece.dim(), op));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> all_sizes,
                      CompletePieceSizes(sizes, size(), piece.size(dim), op));
  if (all_sizes[rank_] != piece.size(dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": sizes ", SizesText(all_sizes), " give rank ", rank_, " size ",
        all_sizes[rank_], " but its ", piece_name, " ", TensorText(piece),
        " has ", piece.size(dim), " along dim ", dim));
  }
  if (rank_ == root) {
    DT_RETURN_IF_ERROR(CheckTensor(whole, whole_name, device(), op));
    DT_RETURN_IF_ERROR(CheckSameDType(input, output, op));
    DT_RETURN_IF_ERROR(
        CheckShape(whole, WithDimSize(piece.shape(), dim, SumOf(all_sizes)),
                   whole_name, op));
    DT_RETURN_IF_ERROR(CheckDisjoint(input, output, op));
  }
  return RootedPieces{dim, std::move(all_sizes)};
}

WorkOrError Communicator::IssueScatter(const Tensor& input,
                                       const Tensor& output, int64_t dim,
                                       int64_t root,
                                       absl::Span<const int64_t> sizes,
                                       const CollectiveOptions& options,
                                       bool blocking) {
  constexpr absl::string_view kOp = "scatter";
  DT_ASSIGN_OR_RETURN(
      RootedPieces pieces,
      CheckRootedPieces(kOp, input, output,
                        /*piece_is_output=*/true, dim, root, sizes));
  dim = pieces.dim;
  std::vector<int64_t> all_sizes = std::move(pieces.sizes);
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature =
        Sign(call,
             absl::StrCat("dim=", dim, " root=", root,
                          " sizes=", SizesText(all_sizes),
                          " dtype=", std::string(DTypeName(output.dtype()))),
             absl::StrCat(
                 "dim=", dim, ", root=", root, ", sizes=", SizesText(all_sizes),
                 ", input=", TensorText(rank_ == root ? input : Tensor()),
                 ", output=", TensorText(output)));
  }
  return StartScatter(rank_ == root ? input : Tensor(), output, dim, root,
                      std::move(all_sizes), call);
}

absl::Status Communicator::Scatter(const Tensor& input, const Tensor& output,
                                   int64_t dim, int64_t root,
                                   absl::Span<const int64_t> sizes,
                                   const CollectiveOptions& options) {
  return Await(IssueScatter(input, output, dim, root, sizes, options, true));
}

std::shared_ptr<Work> Communicator::ScatterAsync(
    const Tensor& input, const Tensor& output, int64_t dim, int64_t root,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return AsWork(IssueScatter(input, output, dim, root, sizes, options, false));
}

// ---- gather ----

WorkOrError Communicator::IssueGather(const Tensor& input, const Tensor& output,
                                      int64_t dim, int64_t root,
                                      absl::Span<const int64_t> sizes,
                                      const CollectiveOptions& options,
                                      bool blocking) {
  constexpr absl::string_view kOp = "gather";
  DT_ASSIGN_OR_RETURN(
      RootedPieces pieces,
      CheckRootedPieces(kOp, input, output,
                        /*piece_is_output=*/false, dim, root, sizes));
  dim = pieces.dim;
  std::vector<int64_t> all_sizes = std::move(pieces.sizes);
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature =
        Sign(call,
             absl::StrCat("dim=", dim, " root=", root,
                          " sizes=", SizesText(all_sizes),
                          " dtype=", std::string(DTypeName(input.dtype()))),
             absl::StrCat(
                 "dim=", dim, ", root=", root, ", sizes=", SizesText(all_sizes),
                 ", input=", TensorText(input),
                 ", output=", TensorText(rank_ == root ? output : Tensor())));
  }
  return StartGather(input, rank_ == root ? output : Tensor(), dim, root,
                     std::move(all_sizes), call);
}

absl::Status Communicator::Gather(const Tensor& input, const Tensor& output,
                                  int64_t dim, int64_t root,
                                  absl::Span<const int64_t> sizes,
                                  const CollectiveOptions& options) {
  return Await(IssueGather(input, output, dim, root, sizes, options, true));
}

std::shared_ptr<Work> Communicator::GatherAsync(
    const Tensor& input, const Tensor& output, int64_t dim, int64_t root,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return AsWork(IssueGather(input, output, dim, root, sizes, options, false));
}

// ---- permute ----

WorkOrError Communicator::IssuePermute(const Tensor& input,
                                       const Tensor& output,
                                       absl::Span<const PermutePair> pairs,
                                       const CollectiveOptions& options,
                                       bool blocking) {
  constexpr absl::string_view kOp = "permute";
  DT_RETURN_IF_ERROR(CheckPermutePairs(pairs, size(), kOp));
  bool sends = false;
  bool receives = false;
  for (const PermutePair& pair : pairs) {
    sends |= pair.src == rank_;
    receives |= pair.dst == rank_;
  }
  if (sends) DT_RETURN_IF_ERROR(CheckTensor(input, "input", device(), kOp));
  if (receives) {
    DT_RETURN_IF_ERROR(CheckTensor(output, "output", device(), kOp));
  }
  // A rank's input and output go to and come from different peers: their
  // shapes and dtypes need not agree.
  if (sends && receives) DT_RETURN_IF_ERROR(CheckDisjoint(input, output, kOp));
  const Tensor sent = sends ? input : Tensor();
  const Tensor received = receives ? output : Tensor();
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, true));
  if (options_.debug) {
    call.signature = Sign(
        call, absl::StrCat("pairs=", PairsText(pairs)),
        absl::StrCat("pairs=", PairsText(pairs), ", input=", TensorText(sent),
                     ", output=", TensorText(received)));
  }
  return StartPermute(sent, received,
                      std::vector<PermutePair>(pairs.begin(), pairs.end()),
                      call);
}

absl::Status Communicator::Permute(const Tensor& input, const Tensor& output,
                                   absl::Span<const PermutePair> pairs,
                                   const CollectiveOptions& options) {
  return Await(IssuePermute(input, output, pairs, options, true));
}

std::shared_ptr<Work> Communicator::PermuteAsync(
    const Tensor& input, const Tensor& output,
    absl::Span<const PermutePair> pairs, const CollectiveOptions& options) {
  return AsWork(IssuePermute(input, output, pairs, options, false));
}

// ---- barrier ----

WorkOrError Communicator::IssueBarrier(const CollectiveOptions& options,
                                       bool blocking) {
  DT_ASSIGN_OR_RETURN(CallInfo call,
                      NewCall("barrier", options, blocking, true));
  if (options_.debug) call.signature = Sign(call, "", "");
  return StartBarrier(call);
}

absl::Status Communicator::Barrier(const CollectiveOptions& options) {
  return Await(IssueBarrier(options, true));
}

std::shared_ptr<Work> Communicator::BarrierAsync(
    const CollectiveOptions& options) {
  return AsWork(IssueBarrier(options, false));
}

// ---- send / recv ----

WorkOrError Communicator::IssueSend(const Tensor& tensor, int64_t dst,
                                    const CollectiveOptions& options,
                                    bool blocking) {
  constexpr absl::string_view kOp = "send";
  DT_RETURN_IF_ERROR(CheckTensor(tensor, "tensor", device(), kOp));
  DT_RETURN_IF_ERROR(CheckGroupRank(dst, size(), "dst", kOp));
  if (dst == rank_) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": rank ", dst, " cannot send to itself"));
  }
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, false));
  if (options_.debug) {
    call.signature =
        Sign(call, TensorText(tensor),
             absl::StrCat("dst=", dst, ", tensor=", TensorText(tensor)));
  }
  return StartSend(tensor, dst, call);
}

absl::Status Communicator::Send(const Tensor& tensor, int64_t dst,
                                const CollectiveOptions& options) {
  return Await(IssueSend(tensor, dst, options, true));
}

std::shared_ptr<Work> Communicator::SendAsync(
    const Tensor& tensor, int64_t dst, const CollectiveOptions& options) {
  return AsWork(IssueSend(tensor, dst, options, false));
}

WorkOrError Communicator::IssueRecv(const Tensor& tensor, int64_t src,
                                    const CollectiveOptions& options,
                                    bool blocking) {
  constexpr absl::string_view kOp = "recv";
  DT_RETURN_IF_ERROR(CheckTensor(tensor, "tensor", device(), kOp));
  DT_RETURN_IF_ERROR(CheckGroupRank(src, size(), "src", kOp));
  if (src == rank_) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": rank ", src, " cannot receive from itself"));
  }
  DT_ASSIGN_OR_RETURN(CallInfo call, NewCall(kOp, options, blocking, false));
  if (options_.debug) {
    call.signature =
        Sign(call, TensorText(tensor),
             absl::StrCat("src=", src, ", tensor=", TensorText(tensor)));
  }
  return StartRecv(tensor, src, call);
}

absl::Status Communicator::Recv(const Tensor& tensor, int64_t src,
                                const CollectiveOptions& options) {
  return Await(IssueRecv(tensor, src, options, true));
}

std::shared_ptr<Work> Communicator::RecvAsync(
    const Tensor& tensor, int64_t src, const CollectiveOptions& options) {
  return AsWork(IssueRecv(tensor, src, options, false));
}

}  // namespace dtensor
