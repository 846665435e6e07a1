#ifndef DTENSOR_COLLECTIVES_INPROCESS_GROUP_STATE_H_
#define DTENSOR_COLLECTIVES_INPROCESS_GROUP_STATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/inprocess/cluster_state.h"
#include "dtensor/collectives/inprocess/posting.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Who waits, and until when: for the deadline and the error messages.
struct WaitContext {
  absl::string_view op;
  int64_t sequence = -1;  // -1 for send and recv.
  absl::Duration timeout;
  absl::Time deadline;
};

// The rendezvous of one in-process group: the members publish their
// postings, meet at phase barriers, and hand point-to-point tensors over.
// Every wait ends by the deadline, on a job failure (ClusterState), or when a
// missing member has exited. A collective wait that fails breaks the group
// (its members may be in different phases now): every later wait fails with
// the same error. Members are indices into the group's rank list.
class GroupState {
 public:
  GroupState(std::vector<int64_t> ranks, std::shared_ptr<ClusterState> cluster);

  // Publishes `member`'s posting, waits until every member has published,
  // and returns all postings in group order.
  absl::StatusOr<Postings> Exchange(int64_t member,
                                    std::shared_ptr<const Posting> posting,
                                    const WaitContext& wait);
  // Waits until every member has arrived: the barrier between phases.
  absl::Status Arrive(int64_t member, const WaitContext& wait);

  // Hands `tensor` to member `dst`'s Recv and returns its status once `dst`
  // has copied it (or failed to: a shape or dtype mismatch fails both).
  absl::Status Send(int64_t src, int64_t dst, const Tensor& tensor,
                    const WaitContext& wait);
  // Copies into `tensor` what member `src` sends to `dst`.
  absl::Status Recv(int64_t src, int64_t dst, const Tensor& tensor,
                    const WaitContext& wait);

  // Wakes the waiters to re-check the cluster's failure state.
  void Wake();

 private:
  // A send on its way: posted by the sender, taken by the receiver.
  struct Transfer {
    Tensor tensor;
    bool taken = false;
    bool done = false;
    absl::Status status;
  };

  // The barrier behind Exchange and Arrive; `posting` may be null.
  absl::StatusOr<Postings> Meet(int64_t member,
                                std::shared_ptr<const Posting> posting,
                                const WaitContext& wait);
  // Why the wait for `missing` members must end now: a job failure, an
  // exited member, the deadline; OK to keep waiting.
  absl::Status WaitFailure(absl::Span<const int64_t> missing,
                           const WaitContext& wait, absl::string_view verb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "all_reduce #3 on group [0, 1]" / "send on group [0, 1]".
  std::string Describe(const WaitContext& wait) const;
  std::vector<int64_t> GlobalRanks(absl::Span<const int64_t> members) const;

  const std::vector<int64_t> ranks_;
  const std::shared_ptr<ClusterState> cluster_;
  Mutex mu_;
  CondVar changed_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);
  int64_t arrived_count_ ABSL_GUARDED_BY(mu_) = 0;
  Postings pending_ ABSL_GUARDED_BY(mu_);    // This generation's postings.
  Postings published_ ABSL_GUARDED_BY(mu_);  // The last complete set.
  std::map<std::pair<int64_t, int64_t>, std::deque<std::shared_ptr<Transfer>>>
      channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_GROUP_STATE_H_
