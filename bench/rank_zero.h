#ifndef DTENSOR_BENCH_RANK_ZERO_H_
#define DTENSOR_BENCH_RANK_ZERO_H_

#include <cstdint>
#include <memory>

#include "dtensor/collectives/process_groups.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/tensor/device.h"

namespace dtensor::bench {

// Rank 0 of an in-process job of `world_size` ranks, driven without the
// other ranks' threads: dispatch that redistributes nothing never talks to
// them, so it times the dispatch alone.
class RankZero {
 public:
  explicit RankZero(int64_t world_size);

  const std::shared_ptr<Runtime>& runtime() const { return runtime_; }

 private:
  ProcessGroups groups_;
  std::shared_ptr<Runtime> runtime_;
};

// The DTensor of rank 0 (of `runtime`, real or metadata-only) of an [8, 8]
// f32 tensor of ones laid out by `sharding_text` ("S(0),R", ...) on `mesh`, its
// local block on `device`. Aborts on bad arguments (benchmarks only).
DTensor OnesOfRankZero(const std::shared_ptr<Runtime>& runtime,
                       const DeviceMesh& mesh, const char* sharding_text,
                       Device device = Device::CPU());

}  // namespace dtensor::bench

#endif  // DTENSOR_BENCH_RANK_ZERO_H_
