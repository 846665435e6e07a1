#ifndef DTENSOR_DTENSOR_RUNTIME_H_
#define DTENSOR_DTENSOR_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/planner.h"

namespace dtensor {

// What the DTensor code of one rank runs with: its global rank, its
// communicators, the cost model of each mesh, and the redistribution planner.
//
// A runtime either drives a real rank (its ProcessGroups reach the peers) or
// is metadata-only: no data and no communication, shardings and costs computed
// as the given rank would see them (for tests and plan checks on meshes of
// any size). Thread-safe; shared by the DTensors made with it.
class Runtime {
 public:
  // A real rank. `groups` is not owned.
  // Requires: `groups` outlives the runtime and every DTensor made with it.
  static std::shared_ptr<Runtime> ForRank(ProcessGroups& groups);
  // A metadata-only view from `rank`.
  static std::shared_ptr<Runtime> MetadataOnly(int64_t rank);

  int64_t rank() const { return rank_; }
  bool metadata_only() const { return groups_ == nullptr; }
  // OK when every rank of `mesh` is a rank of this runtime's world (any mesh
  // in metadata-only mode), so that a mismatch is told before a collective.
  // Errors: InvalidArgument naming the mesh's rank count and the world's
  // ("mesh of 8 ranks [2, 4], world of 4 ranks").
  absl::Status CheckMesh(const DeviceMesh& mesh) const;
  // Null when metadata-only.
  ProcessGroups* groups() const { return groups_; }
  const RedistributePlanner& planner() const {
    return RedistributePlanner::Shared();
  }

  // Sets the link of every dim of `mesh` (for example a slow inter-host dim)
  // used to cost redistributions on it.
  // Errors: InvalidArgument naming a link count other than mesh.ndim(), or a
  //   non-positive bandwidth / negative latency.
  absl::Status SetLinks(const DeviceMesh& mesh, std::vector<MeshDimLink> links);
  // The cost model of `mesh`: its links if set, else the defaults.
  CostModel CostModelFor(const DeviceMesh& mesh) const;
  // Whether SetLinks has succeeded on this runtime: until then every mesh has
  // the default cost model, which lets a cache keyed by the cost model skip
  // CostModelFor on its hot path.
  bool has_links() const { return has_links_.load(std::memory_order_acquire); }

 private:
  Runtime(ProcessGroups* groups, int64_t rank) : groups_(groups), rank_(rank) {}

  ProcessGroups* groups_;
  int64_t rank_;
  mutable Mutex mu_;
  absl::flat_hash_map<DeviceMesh, CostModel> cost_models_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> has_links_{false};
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_RUNTIME_H_
