#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_GROUP_FAILURES_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_GROUP_FAILURES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/multiprocess/arrival_board.h"
#include "dtensor/collectives/multiprocess/rendezvous_session.h"

namespace dtensor {

// One rank's view, through the store, of the failures of a communicator's
// group (multi-process backends): where it posts the error it broke the
// communicator with, and where it learns which peers broke it, exited, or
// never arrived in a call. Ranks are global in what it returns.
class GroupFailures {
 public:
  // An error a member posted when it broke the communicator.
  struct Posted {
    absl::Status status;
    bool point_to_point;  // Posted by a failed send or recv.
  };

  // Keys live under `key_prefix`; `member` is this rank's index in
  // `group_ranks`. `session` must outlive this object.
  GroupFailures(RendezvousSession& session, std::string key_prefix,
                std::vector<int64_t> group_ranks, int64_t member);

  // The slot this rank's collectives enter while they wait.
  ArrivalBoard::Slot& arrival() { return *arrival_; }

  // The error this rank broke the communicator with; OK while it is not.
  absl::Status Broken() const;
  // Breaks the communicator with `status` unless it is broken already, and
  // returns the error it is broken with (the first break wins). The first
  // break posts its error when `post` (not for an error adopted from a peer;
  // `point_to_point`: from a send or recv) and sets `first`: the backend
  // then shuts its transport down, so that peers blocked on it fail at once.
  absl::Status Break(absl::Status status, bool post, bool point_to_point,
                     bool& first);
  // The error another member posted, if any (the lowest member's).
  std::optional<Posted> PeerFailure();
  // The other members whose process has exited.
  std::vector<int64_t> ExitedPeers();
  // The other members that have not posted that they wait in collective
  // `sequence` (or a later one).
  // Errors: those of the store (a host cut off from it cannot tell).
  absl::StatusOr<std::vector<int64_t>> PeersNotArrived(int64_t sequence);
  // The other members: those a rank cut off from the store reports.
  std::vector<int64_t> Peers() const;
  // " (on host b at 10.0.0.2)" (HostsOfRanks), with the hosts the members
  // had published when the communicator was created.
  std::string HostsText(absl::Span<const int64_t> ranks) const;

 private:
  RendezvousSession& session_;
  const std::string key_prefix_;
  const std::vector<int64_t> group_ranks_;
  const int64_t member_;
  const std::shared_ptr<ArrivalBoard::Slot> arrival_;
  const std::map<int64_t, std::string> hosts_;
  mutable Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

// How long a collective waits before it posts that it has arrived.
absl::Duration ArrivalDelay(absl::Duration deadline);

// "[0, 2]".
std::string RanksText(absl::Span<const int64_t> ranks);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_GROUP_FAILURES_H_
