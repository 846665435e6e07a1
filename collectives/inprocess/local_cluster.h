#ifndef DTENSOR_COLLECTIVES_INPROCESS_LOCAL_CLUSTER_H_
#define DTENSOR_COLLECTIVES_INPROCESS_LOCAL_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/tensor/device.h"

namespace dtensor {

// Runs an SPMD function once per rank, each rank on its own thread of this
// process, with the in-process backend: shared-memory collectives, no
// sockets. The default backend, and what unit tests use.
//
//   LocalCluster cluster(4);
//   absl::Status status = cluster.Run([](ProcessGroups& groups) {
//     DT_ASSIGN_OR_RETURN(auto world, groups.World());
//     return world->AllReduce(tensor, ReduceOp::kSum);
//   });
//
// A rank that returns an error or throws aborts the job: the collectives its
// peers wait in (or start later) fail with Unavailable naming it and its
// error. A rank that returns while peers wait for it makes them fail with
// Unavailable too. Every run starts from fresh state.
//
// With a CUDA `device`, the ranks' communicators take tensors on that device
// (all ranks share it) and stage each call through the host
// (HostStagedCommunicator): correct, not fast; for tests and single-GPU
// demos of multi-rank layouts.
class LocalCluster {
 public:
  using RankFunction = std::function<absl::Status(ProcessGroups& groups)>;

  explicit LocalCluster(int64_t world_size,
                        CommunicatorOptions options = CommunicatorOptions(),
                        Device device = Device::CPU());

  int64_t world_size() const { return world_size_; }

  // Runs `fn` on every rank and returns each rank's status (a thrown
  // exception becomes Internal).
  // Errors: a world size < 1 gives one InvalidArgument.
  std::vector<absl::Status> RunPerRank(const RankFunction& fn) const;
  // OK when every rank succeeds.
  // Errors: the first failure (the cause, not the aborts it led to), its
  // message prefixed with the rank.
  absl::Status Run(const RankFunction& fn) const;

 private:
  // RunPerRank, plus the first failure when there is one.
  std::vector<absl::Status> RunRanks(const RankFunction& fn,
                                     absl::Status* first_failure) const;

  int64_t world_size_;
  CommunicatorOptions options_;
  Device device_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_LOCAL_CLUSTER_H_
