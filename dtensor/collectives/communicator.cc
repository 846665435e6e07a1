#include "dtensor/collectives/communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/call_checks.h"
#include "dtensor/collectives/promise_work.h"

namespace dtensor {
namespace {

std::vector<int64_t> ToVector(absl::Span<const int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

}  // namespace

Communicator::Communicator(std::vector<int64_t> group_ranks, int64_t rank,
                           CommunicatorOptions options)
    : group_ranks_(std::move(group_ranks)),
      rank_(rank),
      options_(std::move(options)) {}

std::string Communicator::GroupName() const {
  return absl::StrCat("group [", absl::StrJoin(group_ranks_, ", "), "]");
}

std::string Communicator::Describe(const CollectiveCall& call) const {
  if (call.sequence < 0) return absl::StrCat(call.op, " on ", GroupName());
  return absl::StrCat(call.op, " #", call.sequence, " on ", GroupName());
}

absl::StatusOr<CollectiveCall> Communicator::NewCall(
    CollectiveArgs args, const CollectiveOptions& options, bool blocking) {
  DT_RETURN_IF_ERROR(
      CheckCollectiveArgs(args, CallSite{rank_, size(), device()}));
  CollectiveCall call;
  call.op = CollectiveOpName(args);
  call.deadline = options.deadline.value_or(options_.DeadlineOrDefault());
  if (call.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(call.op, ": the deadline must be positive, got ",
                     absl::FormatDuration(call.deadline)));
  }
  call.blocking = blocking;
  if (!IsPointToPoint(args)) call.sequence = next_sequence_++;
  if (options_.debug) call.signature = SignCollectiveArgs(args, call.sequence);
  call.args = std::move(args);
  return call;
}

std::shared_ptr<Work> Communicator::Submit(CollectiveArgs args,
                                           const CollectiveOptions& options,
                                           bool blocking) {
  absl::StatusOr<CollectiveCall> call =
      NewCall(std::move(args), options, blocking);
  if (!call.ok()) return CompletedWork(call.status());
  return Start(*call);
}

std::shared_ptr<Work> Communicator::Issue(CollectiveArgs args,
                                          const CollectiveOptions& options) {
  return Submit(std::move(args), options, /*blocking=*/false);
}

absl::Status Communicator::Run(CollectiveArgs args,
                               const CollectiveOptions& options) {
  return Submit(std::move(args), options, /*blocking=*/true)->Wait();
}

// ---- The named forms ----

absl::Status Communicator::AllReduce(const Tensor& tensor, ReduceOp op,
                                     const CollectiveOptions& options) {
  return Run(AllReduceArgs{tensor, op}, options);
}
std::shared_ptr<Work> Communicator::AllReduceAsync(
    const Tensor& tensor, ReduceOp op, const CollectiveOptions& options) {
  return Issue(AllReduceArgs{tensor, op}, options);
}

absl::Status Communicator::AllGather(const Tensor& input, const Tensor& output,
                                     int64_t dim,
                                     absl::Span<const int64_t> sizes,
                                     const CollectiveOptions& options) {
  return Run(AllGatherArgs{input, output, dim, ToVector(sizes)}, options);
}
std::shared_ptr<Work> Communicator::AllGatherAsync(
    const Tensor& input, const Tensor& output, int64_t dim,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return Issue(AllGatherArgs{input, output, dim, ToVector(sizes)}, options);
}

absl::Status Communicator::ReduceScatter(const Tensor& input,
                                         const Tensor& output, int64_t dim,
                                         ReduceOp op,
                                         absl::Span<const int64_t> sizes,
                                         const CollectiveOptions& options) {
  return Run(ReduceScatterArgs{input, output, dim, op, ToVector(sizes)},
             options);
}
std::shared_ptr<Work> Communicator::ReduceScatterAsync(
    const Tensor& input, const Tensor& output, int64_t dim, ReduceOp op,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return Issue(ReduceScatterArgs{input, output, dim, op, ToVector(sizes)},
               options);
}

absl::Status Communicator::AllToAll(const Tensor& input, const Tensor& output,
                                    int64_t split_dim, int64_t concat_dim,
                                    absl::Span<const int64_t> send_sizes,
                                    absl::Span<const int64_t> recv_sizes,
                                    const CollectiveOptions& options) {
  return Run(AllToAllArgs{input, output, split_dim, concat_dim,
                          ToVector(send_sizes), ToVector(recv_sizes)},
             options);
}
std::shared_ptr<Work> Communicator::AllToAllAsync(
    const Tensor& input, const Tensor& output, int64_t split_dim,
    int64_t concat_dim, absl::Span<const int64_t> send_sizes,
    absl::Span<const int64_t> recv_sizes, const CollectiveOptions& options) {
  return Issue(AllToAllArgs{input, output, split_dim, concat_dim,
                            ToVector(send_sizes), ToVector(recv_sizes)},
               options);
}

absl::Status Communicator::Broadcast(const Tensor& tensor, int64_t root,
                                     const CollectiveOptions& options) {
  return Run(BroadcastArgs{tensor, root}, options);
}
std::shared_ptr<Work> Communicator::BroadcastAsync(
    const Tensor& tensor, int64_t root, const CollectiveOptions& options) {
  return Issue(BroadcastArgs{tensor, root}, options);
}

absl::Status Communicator::Scatter(const Tensor& input, const Tensor& output,
                                   int64_t dim, int64_t root,
                                   absl::Span<const int64_t> sizes,
                                   const CollectiveOptions& options) {
  return Run(ScatterArgs{input, output, dim, root, ToVector(sizes)}, options);
}
std::shared_ptr<Work> Communicator::ScatterAsync(
    const Tensor& input, const Tensor& output, int64_t dim, int64_t root,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return Issue(ScatterArgs{input, output, dim, root, ToVector(sizes)}, options);
}

absl::Status Communicator::Gather(const Tensor& input, const Tensor& output,
                                  int64_t dim, int64_t root,
                                  absl::Span<const int64_t> sizes,
                                  const CollectiveOptions& options) {
  return Run(GatherArgs{input, output, dim, root, ToVector(sizes)}, options);
}
std::shared_ptr<Work> Communicator::GatherAsync(
    const Tensor& input, const Tensor& output, int64_t dim, int64_t root,
    absl::Span<const int64_t> sizes, const CollectiveOptions& options) {
  return Issue(GatherArgs{input, output, dim, root, ToVector(sizes)}, options);
}

absl::Status Communicator::Permute(const Tensor& input, const Tensor& output,
                                   absl::Span<const PermutePair> pairs,
                                   const CollectiveOptions& options) {
  return Run(PermuteArgs{input, output, {pairs.begin(), pairs.end()}}, options);
}
std::shared_ptr<Work> Communicator::PermuteAsync(
    const Tensor& input, const Tensor& output,
    absl::Span<const PermutePair> pairs, const CollectiveOptions& options) {
  return Issue(PermuteArgs{input, output, {pairs.begin(), pairs.end()}},
               options);
}

absl::Status Communicator::Barrier(const CollectiveOptions& options) {
  return Run(BarrierArgs{}, options);
}
std::shared_ptr<Work> Communicator::BarrierAsync(
    const CollectiveOptions& options) {
  return Issue(BarrierArgs{}, options);
}

absl::Status Communicator::Send(const Tensor& tensor, int64_t dst,
                                const CollectiveOptions& options) {
  return Run(SendArgs{tensor, dst}, options);
}
std::shared_ptr<Work> Communicator::SendAsync(
    const Tensor& tensor, int64_t dst, const CollectiveOptions& options) {
  return Issue(SendArgs{tensor, dst}, options);
}

absl::Status Communicator::Recv(const Tensor& tensor, int64_t src,
                                const CollectiveOptions& options) {
  return Run(RecvArgs{tensor, src}, options);
}
std::shared_ptr<Work> Communicator::RecvAsync(
    const Tensor& tensor, int64_t src, const CollectiveOptions& options) {
  return Issue(RecvArgs{tensor, src}, options);
}

}  // namespace dtensor
