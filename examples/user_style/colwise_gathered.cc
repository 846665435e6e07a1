#include "examples/user_style/colwise_gathered.h"

#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/style_registry.h"

namespace dtensor {
namespace examples {

absl::Status ColwiseGathered::CheckFits(const nn::Module& module,
                                        absl::string_view fqn) const {
  return parallel::CheckModuleType(module, fqn, {"Linear"});
}

std::optional<Placement> ColwiseGathered::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  return Placement::Shard(0);
}

absl::StatusOr<parallel::StyleHooks> ColwiseGathered::Hooks(
    const nn::Module& module, absl::string_view fqn) const {
  parallel::StyleHooks hooks;
  hooks.input = Placement::Replicate();
  hooks.output = Placement::Replicate();
  return hooks;
}

absl::StatusOr<std::shared_ptr<const parallel::ParallelStyle>>
MakeColwiseGathered(const parallel::StyleOptions& options) {
  DT_RETURN_IF_ERROR(parallel::RejectOptions("colwise_gathered", options, {}));
  return std::make_shared<ColwiseGathered>();
}

}  // namespace examples
}  // namespace dtensor
