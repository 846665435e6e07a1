#include "dtensor/nn/init.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"

namespace dtensor {
namespace nn {
namespace {

absl::StatusOr<Sharding> ShardingOf(const InitOptions& options,
                                    const DeviceMesh& mesh,
                                    absl::string_view fqn, const Shape& shape) {
  if (options.sharding) return options.sharding(fqn, shape);
  return Sharding::FromPlacements(
      std::vector<Placement>(mesh.ndim(), Placement::Replicate()),
      static_cast<int64_t>(shape.size()));
}

absl::StatusOr<DTensor> InitializeSlot(const std::shared_ptr<Runtime>& runtime,
                                       const DeviceMesh& mesh,
                                       const InitOptions& options,
                                       const NamedSlot& named) {
  const TensorSlot& slot = *named.slot;
  DT_ASSIGN_OR_RETURN(Sharding sharding,
                      ShardingOf(options, mesh, named.name, slot.shape));
  DT_ASSIGN_OR_RETURN(
      DTensorSpec spec,
      DTensorSpec::Create(mesh, sharding, slot.shape, options.dtype));
  return InitializeDTensor(runtime, spec, slot.init,
                           TensorKey(options.seed, named.name));
}

}  // namespace

absl::Status Initialize(Module& root, std::shared_ptr<Runtime> runtime,
                        const DeviceMesh& mesh, const InitOptions& options) {
  if (runtime == nullptr) {
    return absl::InvalidArgumentError("Initialize: null runtime");
  }
  if (absl::Status fits = runtime->CheckMesh(mesh); !fits.ok()) {
    return absl::Status(fits.code(),
                        absl::StrCat("Initialize: ", fits.message()));
  }
  const std::vector<NamedSlot> slots = root.NamedSlots();
  std::vector<DTensor> values;
  values.reserve(slots.size());
  for (const NamedSlot& named : slots) {
    absl::StatusOr<DTensor> value =
        InitializeSlot(runtime, mesh, options, named);
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat("Initialize \"", named.name,
                                       "\": ", value.status().message()));
    }
    values.push_back(*std::move(value));
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].slot->value = std::move(values[i]);
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
