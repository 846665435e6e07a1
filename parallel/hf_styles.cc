#include "dtensor/parallel/hf_styles.h"

namespace dtensor {
namespace parallel {

absl::StatusOr<StyleHooks> GatherParallel::Hooks(const nn::Module& module,
                                                 absl::string_view fqn) const {
  StyleHooks hooks;
  hooks.local_output = Placement::Partial();
  hooks.output = Placement::Replicate();
  return hooks;
}

std::optional<Placement> ReplicateParallel::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  return Placement::Replicate();
}

absl::StatusOr<StyleHooks> ReplicateParallel::Hooks(
    const nn::Module& module, absl::string_view fqn) const {
  StyleHooks hooks;
  hooks.input = Placement::Replicate();
  hooks.local_input = Placement::Replicate();
  hooks.output = Placement::Replicate();
  return hooks;
}

}  // namespace parallel
}  // namespace dtensor
