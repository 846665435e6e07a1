#ifndef DTENSOR_TESTING_TRAINING_SOAK_H_
#define DTENSOR_TESTING_TRAINING_SOAK_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/parallel/plan.h"

namespace dtensor {
namespace testing {

// What the process holds that a long training run could let grow: live
// tensor storage (tensor/storage.h) and the sizes of the library's caches.
// Every field but resident_bytes is a deterministic count once the step's
// work is done; resident_bytes is the kernel's figure (allocator behaviour
// included), for benchmarks.
struct ProcessFootprint {
  int64_t live_storages = 0;
  int64_t live_storage_bytes = 0;
  // LargeBufferCache::Shared().idle_bytes().
  int64_t idle_large_buffer_bytes = 0;
  // PropagationCache::Shared(): entries and misses so far (a run whose
  // calls miss every step keys the cache by something that changes).
  int64_t propagation_entries = 0;
  int64_t propagation_misses = 0;
  // RedistributePlanner::Shared().size().
  int64_t planner_entries = 0;
  // Rank 0's: communicators its ProcessGroups cached, events kept by the
  // CommCounter (Keep::kTotals) that spans its steps, and collectives it
  // counted (these grow with the steps, by the same number each step).
  int64_t rank0_communicators = 0;
  int64_t rank0_counter_events = 0;
  int64_t rank0_collectives = 0;
  // Resident set from /proc/self/statm (0 where unreadable).
  int64_t resident_bytes = 0;

  // Every field but resident_bytes and rank0_collectives (which grows with
  // the steps by design).
  friend bool operator==(const ProcessFootprint& a, const ProcessFootprint& b);
};

// The process-wide part of the footprint now (the rank 0 fields zero).
ProcessFootprint ProcessFootprintNow();

struct SoakOptions {
  nn::LlamaConfig config;
  int64_t batch = 4;
  int64_t seq = 16;
  uint64_t seed = 0;
  // The ranks: one in-process rank per mesh entry.
  DeviceMesh mesh = *DeviceMesh::Create({1}, {"r"});
  parallel::Plan plan;
  int64_t steps = 10;
  // The steps (1-based) after which the footprint is taken.
  std::vector<int64_t> sample_after;
};

// Trains `options.steps` steps of the Llama model on in-process ranks
// (LocalCluster, CPU; batches of uniform token ids from (seed, step)) and
// calls `sample(step, footprint)` on rank 0 after each step of
// `options.sample_after`, while every rank waits between two barriers: no
// other rank allocates or frees meanwhile, so the counts are exact.
// Errors: the trainer's and the collectives' (a rank's first failure).
absl::Status RunTrainingSoak(
    const SoakOptions& options,
    const std::function<void(int64_t step, const ProcessFootprint&)>& sample);

}  // namespace testing
}  // namespace dtensor

#endif  // DTENSOR_TESTING_TRAINING_SOAK_H_
