#ifndef DTENSOR_COLLECTIVES_PROCESS_GROUPS_H_
#define DTENSOR_COLLECTIVES_PROCESS_GROUPS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/mesh/device_mesh.h"

namespace dtensor {

// The communicators of one rank, created on first use and cached per group
// (an ordered list of global ranks): the handle SPMD code uses to reach its
// peers. Each member of a group must ask for it (the backend may need all of
// them to create it); later requests return the cached communicator.
// Thread-safe.
class ProcessGroups {
 public:
  explicit ProcessGroups(std::shared_ptr<Backend> backend);

  // This rank's global rank, and the number of ranks.
  int64_t rank() const { return backend_->rank(); }
  int64_t world_size() const { return backend_->world_size(); }

  // The group of all ranks, 0 to world_size() - 1.
  absl::StatusOr<std::shared_ptr<Communicator>> World();
  // The group of `ranks` (distinct global ranks in group order, rank() among
  // them).
  absl::StatusOr<std::shared_ptr<Communicator>> ForRanks(
      absl::Span<const int64_t> ranks);
  // The group of `mesh` along `dims` (one dim, or several as if flattened)
  // that contains rank(), ordered row-major over `dims` in the order given,
  // as DeviceMesh::GroupOf orders it.
  absl::StatusOr<std::shared_ptr<Communicator>> ForMeshDims(
      const DeviceMesh& mesh, absl::Span<const int64_t> dims);
  // Like ForMeshDims, with the dims named.
  absl::StatusOr<std::shared_ptr<Communicator>> ForMeshDimNames(
      const DeviceMesh& mesh, absl::Span<const std::string> names);

  // The communicators cached so far: one per distinct group asked for, so
  // a training loop that asks for the same groups every step keeps it
  // constant (tests/parallel/long_run_test.cc).
  int64_t num_cached() const;

 private:
  std::shared_ptr<Backend> backend_;
  mutable Mutex mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<Communicator>> cache_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_PROCESS_GROUPS_H_
