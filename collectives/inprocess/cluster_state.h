#ifndef DTENSOR_COLLECTIVES_INPROCESS_CLUSTER_STATE_H_
#define DTENSOR_COLLECTIVES_INPROCESS_CLUSTER_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/collective_options.h"

namespace dtensor {

class GroupState;

// What the ranks of one LocalCluster::Run share: the groups' rendezvous
// states, and whether the job is failing (a rank failed, or exited while
// peers wait for it). Thread-safe.
class ClusterState : public std::enable_shared_from_this<ClusterState> {
 public:
  ClusterState(int64_t world_size, CommunicatorOptions options);

  int64_t world_size() const { return world_size_; }
  const CommunicatorOptions& options() const { return options_; }

  // The rendezvous state of the `instance`-th group over `ranks`, made by
  // whichever member asks first.
  std::shared_ptr<GroupState> Group(const std::vector<int64_t>& ranks,
                                    int64_t instance);

  // Records that `rank` failed with `cause` (the first failure wins) and
  // wakes every waiting call, which then fails.
  void Abort(int64_t rank, const absl::Status& cause);
  // Records that `rank` has finished for good, and wakes the waiting calls.
  void MarkExited(int64_t rank);

  // Why waiting for the global ranks `missing` is hopeless: Unavailable once
  // the job is aborted or one of them exited; OK otherwise.
  absl::Status WaitFailure(absl::Span<const int64_t> missing);

  // The first failure: its rank and status; nullopt when none.
  std::optional<std::pair<int64_t, absl::Status>> FirstFailure();

 private:
  // Wakes every group's waiters so that they re-check WaitFailure.
  void WakeAllGroups();

  const int64_t world_size_;
  const CommunicatorOptions options_;
  Mutex mu_;
  std::optional<std::pair<int64_t, absl::Status>> failure_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> exited_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::vector<int64_t>, int64_t>, std::weak_ptr<GroupState>>
      groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_CLUSTER_STATE_H_
