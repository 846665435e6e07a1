#ifndef DTENSOR_COLLECTIVES_INPROCESS_LOCAL_BACKEND_H_
#define DTENSOR_COLLECTIVES_INPROCESS_LOCAL_BACKEND_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/inprocess/cluster_state.h"
#include "dtensor/collectives/inprocess/inprocess_communicator.h"

namespace dtensor {

// The Backend of one rank (thread) of a LocalCluster.
class LocalBackend final : public Backend {
 public:
  LocalBackend(std::shared_ptr<ClusterState> cluster, int64_t rank);

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return cluster_->world_size(); }

  // Never waits: the first member to create a group makes its shared state.
  absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
      std::vector<int64_t> ranks) override;

  // Blocks until the asynchronous calls of every communicator made here
  // have finished (each within its deadline).
  void WaitIdle();

 private:
  const std::shared_ptr<ClusterState> cluster_;
  const int64_t rank_;
  Mutex mu_;
  // How many communicators this rank made per rank list: the instance that
  // pairs a new one with the peers' same-numbered ones.
  std::map<std::vector<int64_t>, int64_t> instances_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<InProcessCommunicator>> created_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_LOCAL_BACKEND_H_
