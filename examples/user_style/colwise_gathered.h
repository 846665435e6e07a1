#ifndef DTENSOR_EXAMPLES_USER_STYLE_COLWISE_GATHERED_H_
#define DTENSOR_EXAMPLES_USER_STYLE_COLWISE_GATHERED_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/parallel_style.h"
#include "dtensor/placement.h"

namespace dtensor {
namespace examples {

// A user parallel style, written outside dtensor/parallel/: a Linear's weight
// (and bias) split on the output features like colwise, the input moved to
// Replicate, and the output all-gathered to Replicate, so the modules after
// it see a whole activation. Takes no options.
class ColwiseGathered : public parallel::ParallelStyle {
 public:
  std::string name() const override { return "colwise_gathered"; }
  absl::Status CheckFits(const nn::Module& module,
                         absl::string_view fqn) const override;
  std::optional<Placement> ParameterPlacement(
      const nn::Module& module, absl::string_view slot) const override;
  absl::StatusOr<parallel::StyleHooks> Hooks(
      const nn::Module& module, absl::string_view fqn) const override;
};

// The factory to register (StyleRegistry::Register): rejects every option.
absl::StatusOr<std::shared_ptr<const parallel::ParallelStyle>>
MakeColwiseGathered(const parallel::StyleOptions& options);

}  // namespace examples
}  // namespace dtensor

#endif  // DTENSOR_EXAMPLES_USER_STYLE_COLWISE_GATHERED_H_
