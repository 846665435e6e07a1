#ifndef DTENSOR_NN_INIT_H_
#define DTENSOR_NN_INIT_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/module.h"
#include "dtensor/runtime.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

// The sharding of the slot `fqn` (of global `shape`) on the mesh.
using SlotShardingFn = std::function<absl::StatusOr<Sharding>(
    absl::string_view fqn, const Shape& shape)>;

struct InitOptions {
  uint64_t seed = 0;
  // The dtype of every parameter and buffer (floating for random
  // initializers).
  DType dtype = DType::kF32;
  // Shard and Replicate placements only; unset: Replicate on every mesh dim.
  SlotShardingFn sharding;
};

// Gives every parameter and buffer of the tree `root` its initial value: a
// DTensor on `mesh` laid out by `options.sharding`, whose values its
// initializer draws from the stream TensorKey(options.seed, fqn), with `fqn`
// relative to `root`. A value thus depends only on the seed and the name,
// never on the mesh or the sharding: each rank materialises only its own block
// (dtensor/nn/initializer.h). Under a metadata-only runtime the DTensors have
// no data. Replaces existing values. Errors: a sharding error, a Partial
// placement, this rank not in the mesh, a non-floating dtype (each naming the
// slot); on error no slot is changed.
absl::Status Initialize(Module& root, std::shared_ptr<Runtime> runtime,
                        const DeviceMesh& mesh,
                        const InitOptions& options = {});

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_INIT_H_
