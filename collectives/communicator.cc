#include "dtensor/collectives/communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/call_checks.h"
#include "dtensor/collectives/collective_profile.h"
#include "dtensor/collectives/promise_work.h"

namespace dtensor {
namespace {

std::vector<int64_t> ToVector(absl::Span<const int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

bool AllDistinct(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return std::adjacent_find(values.begin(), values.end()) == values.end();
}

}  // namespace

Communicator::Communicator(std::vector<int64_t> group_ranks, int64_t rank,
                           CommunicatorOptions options)
    : group_ranks_(std::move(group_ranks)),
      rank_(rank),
      options_(std::move(options)) {
  DT_DCHECK(rank_ >= 0 && rank_ < static_cast<int64_t>(group_ranks_.size()));
  DT_DCHECK(AllDistinct(group_ranks_));
}

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
  const absl::string_view op = CollectiveOpName(args);
  return ProfiledWork(Submit(std::move(args), options, /*blocking=*/false),
                      op);
}

absl::Status Communicator::Run(CollectiveArgs args,
                               const CollectiveOptions& options) {
  const absl::string_view op = CollectiveOpName(args);
  const double start_us = Profiler::Active() ? Profiler::ClockUs() : 0;
  absl::Status status =
      Submit(std::move(args), options, /*blocking=*/true)->Wait();
  RecordCollectiveWait(op, start_us);
  return status;
}

// ---- The named forms ----

// Defines the blocking form of collective `Name` (its call run and waited
// for) and its Async form (the call issued), both on the parameters `...`
// and building the call's arguments with `args`.
#define DT_COLLECTIVE_FORMS(Name, args, ...)                          \
  absl::Status Communicator::Name(__VA_ARGS__,                        \
                                  const CollectiveOptions& options) { \
    return Run(args, options);                                        \
  }                                                                   \
  std::shared_ptr<Work> Communicator::Name##Async(                    \
      __VA_ARGS__, const CollectiveOptions& options) {                \
    return Issue(args, options);                                      \
  }

DT_COLLECTIVE_FORMS(AllReduce, (AllReduceArgs{tensor, op}),
                    const Tensor& tensor, ReduceOp op)
DT_COLLECTIVE_FORMS(AllGather,
                    (AllGatherArgs{input, output, dim, ToVector(sizes)}),
                    const Tensor& input, const Tensor& output, int64_t dim,
                    absl::Span<const int64_t> sizes)
DT_COLLECTIVE_FORMS(ReduceScatter,
                    (ReduceScatterArgs{input, output, dim, op,
                                       ToVector(sizes)}),
                    const Tensor& input, const Tensor& output, int64_t dim,
                    ReduceOp op, absl::Span<const int64_t> sizes)
DT_COLLECTIVE_FORMS(AllToAll,
                    (AllToAllArgs{input, output, split_dim, concat_dim,
                                  ToVector(send_sizes), ToVector(recv_sizes)}),
                    const Tensor& input, const Tensor& output,
                    int64_t split_dim, int64_t concat_dim,
                    absl::Span<const int64_t> send_sizes,
                    absl::Span<const int64_t> recv_sizes)
DT_COLLECTIVE_FORMS(Broadcast, (BroadcastArgs{tensor, root}),
                    const Tensor& tensor, int64_t root)
DT_COLLECTIVE_FORMS(Scatter,
                    (ScatterArgs{input, output, dim, root, ToVector(sizes)}),
                    const Tensor& input, const Tensor& output, int64_t dim,
                    int64_t root, absl::Span<const int64_t> sizes)
DT_COLLECTIVE_FORMS(Gather,
                    (GatherArgs{input, output, dim, root, ToVector(sizes)}),
                    const Tensor& input, const Tensor& output, int64_t dim,
                    int64_t root, absl::Span<const int64_t> sizes)
DT_COLLECTIVE_FORMS(Permute,
                    (PermuteArgs{input, output, {pairs.begin(), pairs.end()}}),
                    const Tensor& input, const Tensor& output,
                    absl::Span<const PermutePair> pairs)
DT_COLLECTIVE_FORMS(Send, (SendArgs{tensor, dst}), const Tensor& tensor,
                    int64_t dst)
DT_COLLECTIVE_FORMS(Recv, (RecvArgs{tensor, src}), const Tensor& tensor,
                    int64_t src)

#undef DT_COLLECTIVE_FORMS

// Barrier has no parameters before the options.
absl::Status Communicator::Barrier(const CollectiveOptions& options) {
  return Run(BarrierArgs{}, options);
}
std::shared_ptr<Work> Communicator::BarrierAsync(
    const CollectiveOptions& options) {
  return Issue(BarrierArgs{}, options);
}

}  // namespace dtensor
