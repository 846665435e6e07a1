#ifndef DTENSOR_PARALLEL_PLAN_RESOLUTION_H_
#define DTENSOR_PARALLEL_PLAN_RESOLUTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/fsdp.h"
#include "dtensor/parallel/parallel_style.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/sharding.h"

namespace dtensor {
namespace parallel {

// Whether `pattern` matches the fully-qualified module name `fqn`. Both are
// split at "."; a "*" component matches exactly one component (any name,
// never zero or several), any other component must be equal. So
// "layers.*.attention.wq" matches "layers.3.attention.wq" but not
// "layers.attention.wq" or "layers.3.x.attention.wq".
bool MatchPattern(absl::string_view pattern, absl::string_view fqn);

// A plan entry bound to the module it applies to, or to one parameter of
// it (then `fqn` is the parameter's and `parameter` its slot name).
struct ResolvedEntry {
  std::string fqn;
  nn::Module* module;
  const PlanEntry* entry;
  std::shared_ptr<const ParallelStyle> style;
  std::string parameter;
  // A module entry's hooks (the style's Hooks for the module); a parameter
  // key adds none, so its are empty.
  StyleHooks hooks;
};

// A parameter slot of the tree and the sharding ParallelizeModule gives it.
struct ResolvedParameter {
  std::string fqn;
  nn::TensorSlot* slot;
  Sharding sharding;
};

// What a plan does to one module tree on one mesh, every decision taken and
// checked, nothing applied yet (dtensor/parallel/parallelize.h applies it).
// The pointers are into the tree, valid as long as it is.
struct PlanResolution {
  // The mesh dims: tp when the plan has tp entries, dp when its dp mode is
  // not "none".
  std::optional<int64_t> tp_dim;
  std::optional<int64_t> dp_dim;
  // The entries bound, pre-order: a module's entry, then the parameter keys
  // of its slots.
  std::vector<ResolvedEntry> entries;
  // Every parameter with a value, pre-order: on the tp dim the placement of
  // the style placing it (a parameter key's, else its module key's; a
  // parameter no entry places keeps its current placement); on the dp dim
  // Replicate, and with FSDP dim 0 also sharded on dp, innermost.
  std::vector<ResolvedParameter> parameters;
  // With "dp": "fsdp": the FSDP groups in forward (module) order, each
  // module an fsdp_groups pattern names with the modules of its subtree that
  // own parameters and that no nested group claims, and every other module
  // that owns parameters alone; and their options. Otherwise none.
  std::vector<FsdpGroup> fsdp_groups;
  std::optional<FsdpOptions> fsdp;
};

// Resolves `plan` for the tree `root` on `mesh`: binds every entry of
// `plan.tp` to the modules of `root` it matches (or, matching none, to the
// parameters it matches), takes each module entry's hooks, each parameter's
// sharding and the FSDP groups.
// Errors: (each naming the value) a mesh with ranks outside the world of the
// runtime holding the tree's values (naming both sizes, before any
// collective), a pattern matching no module or parameter (listing the
// modules),
// a module or parameter matched by two patterns, a parameter named by a
// parameter key and by its module's key (naming both), a style that does not
// fit the module's type (ParallelStyle::CheckFits: colwise/rowwise/
// loss_parallel need Linear, colwise/rowwise also accept Embedding;
// sequence_parallel needs RMSNorm, LayerNorm or Dropout; for a parameter
// key, its module's type), tp_dim/dp_dim that are not dims of `mesh` (naming
// the option; dp_dim only when dp is used), a sharding option that does not
// parse (naming it and the module), and an fsdp_groups pattern that names no
// module.
absl::StatusOr<PlanResolution> ResolvePlan(const Plan& plan, nn::Module& root,
                                           const DeviceMesh& mesh);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PLAN_RESOLUTION_H_
