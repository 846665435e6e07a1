#include "dtensor/collectives/inprocess/group_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/inprocess/view_copy.h"

namespace dtensor {

GroupState::GroupState(std::vector<int64_t> ranks,
                       std::shared_ptr<ClusterState> cluster)
    : ranks_(std::move(ranks)),
      cluster_(std::move(cluster)),
      arrived_(ranks_.size(), false),
      pending_(ranks_.size()) {}

absl::StatusOr<Postings> GroupState::Exchange(
    int64_t member, std::shared_ptr<const Posting> posting,
    const WaitContext& wait) {
  return Meet(member, std::move(posting), wait);
}

absl::Status GroupState::Arrive(int64_t member, const WaitContext& wait) {
  return Meet(member, nullptr, wait).status();
}

absl::StatusOr<Postings> GroupState::Meet(
    int64_t member, std::shared_ptr<const Posting> posting,
    const WaitContext& wait) {
  MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  const uint64_t generation = generation_;
  pending_[member] = std::move(posting);
  arrived_[member] = true;
  if (++arrived_count_ == static_cast<int64_t>(ranks_.size())) {
    // The last to arrive publishes the set. Nobody can start the next
    // generation before every member has read this one: that needs them all.
    published_.swap(pending_);
    pending_.assign(ranks_.size(), nullptr);
    arrived_.assign(ranks_.size(), false);
    arrived_count_ = 0;
    ++generation_;
    changed_.SignalAll();
    return published_;
  }
  while (generation_ == generation) {
    if (!broken_.ok()) return broken_;
    std::vector<int64_t> missing;
    for (int64_t m = 0; m < static_cast<int64_t>(ranks_.size()); ++m) {
      if (!arrived_[m]) missing.push_back(m);
    }
    absl::Status failure = WaitFailure(missing, wait, "did not arrive");
    if (!failure.ok()) {
      broken_ = failure;
      changed_.SignalAll();
      return failure;
    }
    changed_.WaitWithDeadline(&mu_, wait.deadline);
  }
  return published_;
}

absl::Status GroupState::Send(int64_t src, int64_t dst, const Tensor& tensor,
                              const WaitContext& wait) {
  auto transfer = std::make_shared<Transfer>();
  transfer->tensor = tensor;
  MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  std::deque<std::shared_ptr<Transfer>>& channel = channels_[{src, dst}];
  channel.push_back(transfer);
  changed_.SignalAll();
  while (!transfer->done) {
    if (!transfer->taken) {
      const int64_t missing[] = {dst};
      absl::Status failure = WaitFailure(missing, wait, "did not receive");
      if (!failure.ok()) {
        channel.erase(std::find(channel.begin(), channel.end(), transfer));
        return failure;
      }
    }
    // Once taken, the receiver is copying: it finishes without waiting.
    changed_.WaitWithDeadline(
        &mu_, transfer->taken ? absl::InfiniteFuture() : wait.deadline);
  }
  return transfer->status;
}

absl::Status GroupState::Recv(int64_t src, int64_t dst, const Tensor& tensor,
                              const WaitContext& wait) {
  std::shared_ptr<Transfer> transfer;
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    std::deque<std::shared_ptr<Transfer>>& channel = channels_[{src, dst}];
    while (channel.empty()) {
      const int64_t missing[] = {src};
      absl::Status failure = WaitFailure(missing, wait, "did not send");
      if (!failure.ok()) return failure;
      changed_.WaitWithDeadline(&mu_, wait.deadline);
    }
    transfer = channel.front();
    channel.pop_front();
    transfer->taken = true;
  }
  absl::Status status;
  if (transfer->tensor.dtype() != tensor.dtype() ||
      transfer->tensor.shape() != tensor.shape()) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "send/recv on group [", absl::StrJoin(ranks_, ", "), "]: rank ",
        ranks_[src], " sends ", TensorText(transfer->tensor), " but rank ",
        ranks_[dst], " receives into ", TensorText(tensor)));
  } else {
    status = CopyView(tensor, transfer->tensor);
  }
  MutexLock lock(&mu_);
  transfer->status = status;
  transfer->done = true;
  changed_.SignalAll();
  return status;
}

void GroupState::Wake() {
  MutexLock lock(&mu_);
  changed_.SignalAll();
}

absl::Status GroupState::WaitFailure(absl::Span<const int64_t> missing,
                                     const WaitContext& wait,
                                     absl::string_view verb) {
  const std::vector<int64_t> missing_ranks = GlobalRanks(missing);
  absl::Status failure = cluster_->WaitFailure(missing_ranks);
  if (!failure.ok()) {
    return absl::Status(failure.code(),
                        absl::StrCat(Describe(wait), ": ", failure.message()));
  }
  if (absl::Now() < wait.deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      Describe(wait), ": ranks [", absl::StrJoin(missing_ranks, ", "), "] ",
      verb, " within ", absl::FormatDuration(wait.timeout)));
}

std::string GroupState::Describe(const WaitContext& wait) const {
  const std::string group =
      absl::StrCat("group [", absl::StrJoin(ranks_, ", "), "]");
  if (wait.sequence < 0) return absl::StrCat(wait.op, " on ", group);
  return absl::StrCat(wait.op, " #", wait.sequence, " on ", group);
}

std::vector<int64_t> GroupState::GlobalRanks(
    absl::Span<const int64_t> members) const {
  std::vector<int64_t> global;
  for (int64_t member : members) global.push_back(ranks_[member]);
  return global;
}

}  // namespace dtensor
