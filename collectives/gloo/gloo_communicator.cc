#include "dtensor/collectives/gloo/gloo_communicator.h"

#include <exception>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/gloo/tensor_transfer.h"
#include "dtensor/collectives/promise_work.h"
#include "gloo/allgatherv.h"

namespace dtensor {
namespace {

// How long a rank whose connection closed gives the store to learn why
// (the peer's posted error, or its exit).
constexpr absl::Duration kCauseGrace = absl::Seconds(2);
constexpr absl::Duration kCausePoll = absl::Milliseconds(5);

// 8 bits of what every rank of a matching call knows alike: the bytes the
// call moves where all ranks agree on them (0 where their views differ by
// design: uneven all_to_all, scatter and gather pieces; point-to-point calls
// check their sizes themselves, tensor_transfer.h).
uint32_t SharedFingerprint(const CollectiveArgs& args) {
  const int64_t bytes = std::visit(
      [](const auto& a) -> int64_t {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, AllReduceArgs> ||
                      std::is_same_v<A, BroadcastArgs>) {
          return a.tensor.nbytes();
        } else if constexpr (std::is_same_v<A, AllGatherArgs>) {
          return a.output.nbytes();
        } else if constexpr (std::is_same_v<A, ReduceScatterArgs>) {
          return a.input.nbytes();
        } else {
          return 0;
        }
      },
      args);
  const uint64_t mixed = static_cast<uint64_t>(bytes) * 0x9e3779b97f4a7c15ull;
  return static_cast<uint32_t>(mixed >> 56);
}

}  // namespace

// The op's messages (phase 0) also carry the call's shared fingerprint, so
// that ranks that disagree on a call's size (a rank that issued another call
// at this position, as after a failure on some ranks) post Gloo buffers under
// different slots: their data never meets, and the call ends at its deadline
// on every rank, where a message larger than the buffer Gloo posted for it
// aborts the process. The debug checks (phases 1, 2) leave it out, so that
// they still meet and report the mismatch. 22 bits of the sequence: calls
// that far apart are never in flight together.
uint32_t GlooCommunicator::Running::Tag(int phase) const {
  const uint32_t fingerprint = phase == 0 ? SharedFingerprint(call.args) : 0;
  return static_cast<uint32_t>(((call.sequence & 0x3fffff) << 10) |
                               (fingerprint << 2) | phase);
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

void GlooCommunicator::WaitIdle() { queues_.WaitIdle(); }

// ---- Running calls ----

std::shared_ptr<Work> GlooCommunicator::SubmitCollective(
    const CollectiveCall& call, CallTraffic traffic, Body body) {
  return queues_.Submit(
      call, [this, call, traffic = std::move(traffic), body = std::move(body)] {
        return RunCollective(call, traffic, body);
      });
}

std::shared_ptr<Work> GlooCommunicator::SubmitPointToPoint(
    const CollectiveCall& call, int64_t peer, bool sending, Body body) {
  return queues_.Submit(
      call, [this, call, peer, sending, body = std::move(body)] {
        absl::Status broken = failures_.Broken();
        if (!broken.ok()) return broken;
        const Running running{call, absl::Now() + call.deadline};
        return RunGuarded(running, body, peer, sending);
      });
}

absl::Status GlooCommunicator::RunCollective(const CollectiveCall& call,
                                             const CallTraffic& traffic,
                                             const Body& body) {
  DT_RETURN_IF_ERROR(failures_.Broken());
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
  absl::Status broken = failures_.Broken();
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
    opts.setOutput<char>(texts.data(),
                         std::vector<size_t>(lengths.begin(), lengths.end()));
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
  auto missing_error = [&](absl::Span<const int64_t> ranks,
                           absl::string_view why = "") {
    return absl::DeadlineExceededError(
        absl::StrCat(name, ": ranks ", RanksText(ranks), " ", verb, " within ",
                     within, failures_.HostsText(ranks), why));
  };
  auto exited_error = [&](absl::Span<const int64_t> ranks) {
    return absl::UnavailableError(absl::StrCat(name, ": ranks ",
                                               RanksText(ranks), " exited",
                                               failures_.HostsText(ranks)));
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
  if (peer.has_value()) return {missing_error({group_ranks()[*peer]}), false};
  const absl::StatusOr<std::vector<int64_t>> missing =
      failures_.PeersNotArrived(running.call.sequence);
  // Cut off from the store as well (this host's link is down, or the
  // master's host is gone): every peer is out of reach.
  if (!missing.ok()) {
    return {missing_error(failures_.Peers(),
                          absl::StrCat(", and ", missing.status().message())),
            false};
  }
  if (!missing->empty()) return {missing_error(*missing), false};
  return {absl::DeadlineExceededError(
              absl::StrCat(name, ": did not finish within ", within,
                           " although every rank arrived (", what, ")")),
          false};
}

absl::Status GlooCommunicator::Break(absl::Status status, bool post,
                                     bool point_to_point) {
  bool first = false;
  status = failures_.Break(std::move(status), post, point_to_point, first);
  if (first) context_->closeConnections();
  return status;
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
