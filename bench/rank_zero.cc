#include "bench/rank_zero.h"

#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/inprocess/cluster_state.h"
#include "dtensor/collectives/inprocess/local_backend.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::bench {

RankZero::RankZero(int64_t world_size)
    : groups_(std::make_shared<LocalBackend>(
          std::make_shared<ClusterState>(world_size, CommunicatorOptions()),
          0)),
      runtime_(Runtime::ForRank(groups_)) {}

DTensor OnesOfRankZero(const std::shared_ptr<Runtime>& runtime,
                       const DeviceMesh& mesh, const char* sharding_text,
                       Device device) {
  const Sharding sharding = *Sharding::Parse(sharding_text, 2);
  const DTensorSpec spec =
      *DTensorSpec::Create(mesh, sharding, {8, 8}, DType::kF32);
  if (runtime->metadata_only()) return *DTensor::FromSpec(runtime, spec);
  const ShardBlock block = *spec.BlockOf(runtime->rank());
  FromLocalOptions options;
  options.global_shape = Shape{8, 8};
  return *DTensor::FromLocal(runtime,
                             *Tensor::Ones(block.shape, DType::kF32, device),
                             mesh, sharding.placements(), options);
}

}  // namespace dtensor::bench
