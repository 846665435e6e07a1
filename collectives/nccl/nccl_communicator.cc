#include "dtensor/collectives/nccl/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/promise_work.h"

namespace dtensor {
namespace {

// How often a waiting call looks in the store for failed or exited peers.
constexpr absl::Duration kPeerCheck = absl::Milliseconds(50);
constexpr absl::Duration kFirstPoll = absl::Microseconds(10);
constexpr absl::Duration kLongestPoll = absl::Milliseconds(1);

// A debug-mode post: the call record (little-endian int64s), then the
// signature text.
std::string EncodeCheck(const std::vector<int64_t>& record,
                        const std::string& text) {
  std::string post;
  for (int64_t value : record) {
    for (int byte = 0; byte < 8; ++byte) {
      post.push_back(static_cast<char>(
          (static_cast<uint64_t>(value) >> (8 * byte)) & 0xff));
    }
  }
  return post + text;
}

}  // namespace

// The Work of a launched call: waits for its GPU work, within its deadline.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator> comm,
           NcclCommunicator::Launched launched, cudaEvent_t done,
           std::vector<Tensor> keep)
      : comm_(std::move(comm)),
        launched_(std::move(launched)),
        done_(done),
        keep_(std::move(keep)) {}

  // A Work dropped unwaited still waits (within its deadline): the tensors
  // must outlive the GPU's use of them.
  ~NcclWork() override {
    Wait().IgnoreError();
    cudaEventDestroy(done_);
  }

  absl::Status Wait() override {
    MutexLock lock(&mu_);
    if (!status_.has_value()) {
      status_ = comm_->Await(launched_, done_);
      keep_.clear();
    }
    return *status_;
  }

  bool IsCompleted() const override {
    MutexLock lock(&mu_);
    return status_.has_value() || cudaEventQuery(done_) == cudaSuccess;
  }

 private:
  const std::shared_ptr<NcclCommunicator> comm_;
  const NcclCommunicator::Launched launched_;
  const cudaEvent_t done_;
  mutable Mutex mu_;
  std::optional<absl::Status> status_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> keep_ ABSL_GUARDED_BY(mu_);
};

NcclCommunicator::NcclCommunicator(std::vector<int64_t> group_ranks,
                                   int64_t rank, CommunicatorOptions options,
                                   std::shared_ptr<NcclRuntime> runtime,
                                   std::unique_ptr<NcclChannel> channel,
                                   std::string key_prefix)
    : Communicator(std::move(group_ranks), rank, std::move(options)),
      runtime_(std::move(runtime)),
      channel_(std::move(channel)),
      key_prefix_(std::move(key_prefix)),
      failures_(*runtime_->session, key_prefix_, this->group_ranks(),
                this->rank()) {}

// ---- Launching and waiting ----

std::shared_ptr<Work> NcclCommunicator::Start(const CollectiveCall& call) {
  if (const auto* send = std::get_if<SendArgs>(&call.args)) {
    return SubmitPointToPoint(call, send->tensor, send->dst, true);
  }
  if (const auto* recv = std::get_if<RecvArgs>(&call.args)) {
    return SubmitPointToPoint(call, recv->tensor, recv->src, false);
  }
  return LaunchCollective(call);
}

std::shared_ptr<Work> NcclCommunicator::LaunchCollective(
    const CollectiveCall& call) {
  const absl::Time deadline = absl::Now() + call.deadline;
  absl::StatusOr<Prepared> prepared = std::visit(
      [this](const auto& args) -> absl::StatusOr<Prepared> {
        using Args = std::decay_t<decltype(args)>;
        if constexpr (std::is_same_v<Args, SendArgs> ||
                      std::is_same_v<Args, RecvArgs>) {
          return absl::InternalError("a send or recv is not a collective");
        } else {
          return Prepare(args);
        }
      },
      call.args);
  // A rank that cannot take part leaves its peers waiting: break.
  if (!prepared.ok())
    return CompletedWork(Break(prepared.status(), true, false));
  if (options().debug) {
    absl::Status agreed = CheckCallsAgree(call, deadline);
    if (!agreed.ok()) return CompletedWork(agreed);
  }
  return Launch(Launched{call, deadline, channel_.get(), std::nullopt, false},
                std::move(prepared->keep), prepared->enqueue);
}

std::shared_ptr<Work> NcclCommunicator::Launch(Launched launched,
                                               std::vector<Tensor> keep,
                                               const Enqueue& enqueue) {
  absl::Status broken = failures_.Broken();
  if (!broken.ok()) return CompletedWork(broken);
  const bool point_to_point = launched.peer.has_value();
  cudaEvent_t done = nullptr;
  absl::Status status = FromCuda(
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
  if (status.ok()) {
    status = launched.channel->Enqueue(launched.deadline, done, enqueue);
  }
  if (!status.ok()) {
    if (done != nullptr) cudaEventDestroy(done);
    status = absl::Status(status.code(), absl::StrCat(Describe(launched.call),
                                                      ": ", status.message()));
    // A rank that cannot join leaves its peers waiting: break.
    if (status.code() != absl::StatusCode::kInvalidArgument) {
      status = Break(status, true, point_to_point);
    }
    return CompletedWork(status);
  }
  return std::make_shared<NcclWork>(shared_from_this(), std::move(launched),
                                    done, std::move(keep));
}

absl::Status NcclCommunicator::MissingRanks(
    const Launched& launched, absl::Span<const int64_t> ranks) const {
  const char* verb = !launched.peer.has_value() ? "did not arrive"
                     : launched.sending         ? "did not receive"
                                                : "did not send";
  return absl::DeadlineExceededError(absl::StrCat(
      Describe(launched.call), ": ranks ", RanksText(ranks), " ", verb,
      " within ", absl::FormatDuration(launched.call.deadline),
      failures_.HostsText(ranks)));
}

absl::Status NcclCommunicator::CheckPeers(const Launched& launched) {
  const bool point_to_point = launched.peer.has_value();
  if (std::optional<GroupFailures::Posted> cause = failures_.PeerFailure()) {
    // A peer's send or recv that timed out is reported from this side.
    return point_to_point && cause->point_to_point &&
                   cause->status.code() == absl::StatusCode::kDeadlineExceeded
               ? Break(MissingRanks(launched, {group_ranks()[*launched.peer]}),
                       false, true)
               : Break(cause->status, false, point_to_point);
  }
  std::vector<int64_t> exited = failures_.ExitedPeers();
  if (point_to_point) {
    const int64_t peer = group_ranks()[*launched.peer];
    exited.erase(std::remove_if(exited.begin(), exited.end(),
                                [peer](int64_t r) { return r != peer; }),
                 exited.end());
  }
  if (exited.empty()) return absl::OkStatus();
  return Break(absl::UnavailableError(absl::StrCat(
                   Describe(launched.call), ": ", "ranks ", RanksText(exited),
                   " exited", failures_.HostsText(exited))),
               true, point_to_point);
}

absl::Status NcclCommunicator::DeadlineError(const Launched& launched) {
  const bool point_to_point = launched.peer.has_value();
  // Cut off from the store, a rank cannot tell who arrived: every peer is
  // out of reach.
  const std::vector<int64_t> missing =
      point_to_point ? std::vector<int64_t>{group_ranks()[*launched.peer]}
                     : failures_.PeersNotArrived(launched.call.sequence)
                           .value_or(failures_.Peers());
  return Break(missing.empty()
                   ? absl::DeadlineExceededError(absl::StrCat(
                         Describe(launched.call), ": did not finish within ",
                         absl::FormatDuration(launched.call.deadline),
                         " although every rank arrived"))
                   : MissingRanks(launched, missing),
               true, point_to_point);
}

absl::Status NcclCommunicator::Await(const Launched& launched,
                                     cudaEvent_t done) {
  const CollectiveCall& call = launched.call;
  const bool point_to_point = launched.peer.has_value();
  if (!point_to_point) {
    failures_.arrival().Enter(call.sequence, ArrivalDelay(call.deadline));
  }
  absl::Status status;
  absl::Duration pause = kFirstPoll;
  absl::Time next_check = absl::Now() + kPeerCheck;
  while (true) {
    const cudaError_t query = cudaEventQuery(done);
    if (query == cudaSuccess) break;
    if (query != cudaErrorNotReady) {
      status = Break(absl::InternalError(absl::StrCat(
                         Describe(call), ": ", cudaGetErrorString(query))),
                     true, point_to_point);
      break;
    }
    status = failures_.Broken();
    if (!status.ok()) break;
    absl::Status nccl = launched.channel->AsyncError();
    if (!nccl.ok()) {
      status = Break(absl::UnavailableError(
                         absl::StrCat(Describe(call), ": ", nccl.message())),
                     true, point_to_point);
      break;
    }
    if (absl::Now() >= next_check) {
      status = CheckPeers(launched);
      if (!status.ok()) break;
      next_check = absl::Now() + kPeerCheck;
    }
    if (absl::Now() >= launched.deadline) {
      status = DeadlineError(launched);
      break;
    }
    absl::SleepFor(pause);
    pause = std::min(2 * pause, kLongestPoll);
  }
  if (!point_to_point) failures_.arrival().Leave();
  return status;
}

absl::Status NcclCommunicator::CheckCallsAgree(const CollectiveCall& call,
                                               absl::Time deadline) {
  const int64_t n = size();
  const std::vector<int64_t> record =
      EncodeCallRecord(*call.signature, TrafficOf(call.args, rank(), n), n);
  std::vector<std::string> keys;
  for (int64_t member = 0; member < n; ++member) {
    keys.push_back(
        absl::StrCat(key_prefix_, "call/", call.sequence, "/", member));
  }
  StoreClient& client = runtime_->session->client();
  DT_RETURN_IF_ERROR(client.Set(
      keys[rank()], EncodeCheck(record, EncodeSignatureText(*call.signature))));
  absl::StatusOr<std::vector<std::string>> posts =
      client.WaitAndGet(keys, deadline - absl::Now());
  if (!posts.ok()) {
    return Break(absl::DeadlineExceededError(absl::StrCat(
                     Describe(call), ": not every rank arrived within ",
                     absl::FormatDuration(call.deadline), " (",
                     posts.status().message(), ")")),
                 true, false);
  }
  const size_t record_bytes = record.size() * 8;
  std::vector<int64_t> records;
  std::string texts;
  for (const std::string& post : *posts) {
    if (post.size() < record_bytes) {
      return absl::DataLossError(
          absl::StrCat(Describe(call), ": malformed debug check"));
    }
    for (size_t i = 0; i < record.size(); ++i) {
      uint64_t bits = 0;
      for (int byte = 0; byte < 8; ++byte) {
        bits |= static_cast<uint64_t>(static_cast<uint8_t>(post[i * 8 + byte]))
                << (8 * byte);
      }
      records.push_back(static_cast<int64_t>(bits));
    }
    texts += post.substr(record_bytes);
  }
  if (!SignaturesDiffer(records, n)) {
    return CheckTraffic(records, group_ranks(), Describe(call));
  }
  DT_ASSIGN_OR_RETURN(
      std::vector<CallSignature> calls,
      DecodeSignatureTexts(texts, SignatureTextLengths(records, n)));
  return CheckSameCall(calls, group_ranks());
}

absl::StatusOr<NcclChannel*> NcclCommunicator::PointToPointChannel(
    int64_t src, int64_t dst, absl::Time deadline) {
  MutexLock lock(&channels_mu_);
  std::unique_ptr<NcclChannel>& channel = point_to_point_[{src, dst}];
  if (channel != nullptr) return channel.get();
  // The sender makes the id; both join as ranks 0 (src) and 1 (dst).
  const std::string key = absl::StrCat(key_prefix_, "p2p/", src, "-", dst);
  StoreClient& client = runtime_->session->client();
  ncclUniqueId id;
  if (src == rank()) {
    DT_RETURN_IF_ERROR(FromNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    DT_RETURN_IF_ERROR(client.Set(
        key,
        absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    DT_ASSIGN_OR_RETURN(std::vector<std::string> posted,
                        client.WaitAndGet({key}, deadline - absl::Now()));
    if (posted[0].size() != sizeof(id)) {
      return absl::DataLossError("malformed NCCL id in the store");
    }
    std::memcpy(&id, posted[0].data(), sizeof(id));
  }
  DT_ASSIGN_OR_RETURN(
      channel, NcclChannel::Join(runtime_->device, 2, src == rank() ? 0 : 1, id,
                                 deadline));
  return channel.get();
}

absl::Status NcclCommunicator::Break(absl::Status status, bool post,
                                     bool point_to_point) {
  bool first = false;
  status = failures_.Break(std::move(status), post, point_to_point, first);
  if (!first) return status;
  channel_->Abort();
  MutexLock lock(&channels_mu_);
  for (auto& [direction, channel] : point_to_point_) {
    if (channel != nullptr) channel->Abort();
  }
  return status;
}

absl::Status NcclCommunicator::RunPointToPoint(const CollectiveCall& call,
                                               const Tensor& tensor,
                                               int64_t peer, bool sending) {
  const absl::Time deadline = absl::Now() + call.deadline;
  const int64_t src = sending ? rank() : peer;
  const int64_t dst = sending ? peer : rank();
  absl::StatusOr<NcclChannel*> channel =
      PointToPointChannel(src, dst, deadline);
  if (!channel.ok()) {
    if (channel.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(call), ": ranks [", group_ranks()[peer], "] ",
                       sending ? "did not receive" : "did not send", " within ",
                       absl::FormatDuration(call.deadline)));
    }
    return absl::Status(
        channel.status().code(),
        absl::StrCat(Describe(call), ": ", channel.status().message()));
  }
  DT_ASSIGN_OR_RETURN(Prepared prepared, PrepareTransfer(tensor, sending));
  std::shared_ptr<Work> work =
      Launch(Launched{call, deadline, *channel, peer, sending},
             std::move(prepared.keep), prepared.enqueue);
  return work->Wait();
}

std::shared_ptr<Work> NcclCommunicator::SubmitPointToPoint(
    const CollectiveCall& call, const Tensor& tensor, int64_t peer,
    bool sending) {
  return queues_.Submit(call, [this, call, tensor, peer, sending] {
    return RunPointToPoint(call, tensor, peer, sending);
  });
}

}  // namespace dtensor
