#ifndef DTENSOR_PARALLEL_HF_STYLES_H_
#define DTENSOR_PARALLEL_HF_STYLES_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/parallel_style.h"
#include "dtensor/placement.h"

namespace dtensor {
namespace parallel {

// The styles that Hugging Face Transformers' tp_plan names beyond PyTorch's
// (transformers' tensor_parallel.py), on our global-shape modules. None takes
// options (the registry rejects any, naming it: style_registry.h).
// docs/parallel.md states each mapping.
//
// Contract of the three, beyond ParallelStyle's: each fits every module
// (CheckFits is always OK), and Hooks never fails (there is no option to
// parse).

// "local" (HF's IsolatedParallel): parameters keep their placement and no
// hook runs; the module computes on the value it is given, a tp-local value
// (from a use_local_output style) staying tp-local, a global DTensor global.
class LocalParallel : public ParallelStyle {
 public:
  std::string name() const override { return "local"; }
  absl::Status CheckFits(const nn::Module&, absl::string_view) const override {
    return absl::OkStatus();
  }
  std::optional<Placement> ParameterPlacement(
      const nn::Module&, absl::string_view) const override {
    return std::nullopt;
  }
  absl::StatusOr<StyleHooks> Hooks(const nn::Module&,
                                   absl::string_view) const override {
    return StyleHooks{};
  }
};

// "gather" (HF's GatherParallel, which all-reduces a module's local output):
// parameters keep their placement; the output is made Replicate on the tp
// dim: a tp-local output is taken as this rank's Partial(sum) term, as HF
// sums the ranks' local outputs, and a global one is redistributed (Partial:
// all-reduce, Shard: all-gather, Replicate: nothing).
class GatherParallel : public LocalParallel {
 public:
  std::string name() const override { return "gather"; }
  absl::StatusOr<StyleHooks> Hooks(const nn::Module& module,
                                   absl::string_view fqn) const override;
};

// "replicate" (HF's ReplicateParallel): parameters Replicate on the tp dim;
// input and output moved to Replicate (a tp-local input is read as the
// replica).
class ReplicateParallel : public LocalParallel {
 public:
  std::string name() const override { return "replicate"; }
  std::optional<Placement> ParameterPlacement(
      const nn::Module& module, absl::string_view slot) const override;
  absl::StatusOr<StyleHooks> Hooks(const nn::Module& module,
                                   absl::string_view fqn) const override;
};

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_HF_STYLES_H_
