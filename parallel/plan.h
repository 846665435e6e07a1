#ifndef DTENSOR_PARALLEL_PLAN_H_
#define DTENSOR_PARALLEL_PLAN_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/parallel_style.h"

namespace dtensor {
namespace parallel {

// The names plan files give PyTorch's styles (the classes of
// dtensor/parallel/parallel_style.h); dtensor/parallel/style_registry.h lists
// every name a plan file may use.
struct Style {
  static constexpr absl::string_view kColwise = "colwise";
  static constexpr absl::string_view kRowwise = "rowwise";
  static constexpr absl::string_view kSequenceParallel = "sequence_parallel";
  static constexpr absl::string_view kPrepareInput = "prepare_input";
  static constexpr absl::string_view kPrepareOutput = "prepare_output";
  static constexpr absl::string_view kLossParallel = "loss_parallel";
};

// One entry of the "tp" object as written: a style name (looked up in
// StyleRegistry::Global()) with its options (StyleOptions).
struct StyleSpec : StyleOptions {
  std::string style = std::string(Style::kColwise);
};

enum class DataParallel { kNone, kReplicate, kFsdp };
absl::string_view DataParallelName(DataParallel dp);

// A parsed plan file:
//   {"tp_dim": "tp", "dp_dim": "dp",
//    "tp": {"layers.*.attention.wq": "colwise",
//           "output": {"style": "colwise", "output_layouts": "S(-1)",
//                      "use_local_output": false}},
//    "dp": "fsdp" | "replicate" | "none",
//    "bucket_mb": 25, "first_bucket_mb": 1,
//    "fsdp_groups": ["layers.*"], "fsdp_prefetch": true}
// "tp_dim"/"dp_dim" default to "tp"/"dp"; "tp" defaults to {} and "dp" to
// "none"; "bucket_mb" (the size of the gradient buckets whose all-reduces
// overlap the backward pass, dtensor/parallel/gradient_buckets.h) to 25 and
// "first_bucket_mb" (the first bucket's, as DDP's first_bucket_bytes) to 1;
// "fsdp_groups" (module-name patterns) to [] and "fsdp_prefetch" to true,
// both only with "dp": "fsdp".
// Entries keep file order.
// An entry's pattern names modules, or, when it matches no module,
// parameters ("layers.*.mlp.up_proj.weight", as Hugging Face's tp_plan
// allows): the style then places those parameters alone (as for their
// module) and adds no hooks. `style` is the style object: ParsePlan makes it
// from `spec` through the registry; a plan built in code may set it directly
// (then `spec` is not used), or leave it null to have ResolvePlan make it
// from `spec`.
struct PlanEntry {
  std::string pattern;
  StyleSpec spec;
  std::shared_ptr<const ParallelStyle> style;
};
struct Plan {
  std::string tp_dim = "tp";
  std::string dp_dim = "dp";
  std::vector<PlanEntry> tp;
  DataParallel dp = DataParallel::kNone;
  int64_t bucket_bytes = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // FSDP (dp: fsdp): the module-name patterns whose modules are gathered
  // as one group each (dtensor/parallel/fsdp.h); a module owning parameters
  // outside every group is a group of its own. Prefetch: gather the next
  // group while one computes.
  std::vector<std::string> fsdp_groups;
  bool fsdp_prefetch = true;
};

// A Hugging Face config.json is a plan too: an object with
// "base_model_tp_plan" (or "tp_plan") and none of the keys above is read as
// {"tp": <that object>}; its other keys are ignored.
//
// Parses plan text.
// Errors: unknown top-level keys, styles, options or dp modes, options a
// style does not take, wrong JSON types, a config.json with both tp plans
// (InvalidArgument naming the bad key or value).
absl::StatusOr<Plan> ParsePlan(absl::string_view json);
// Reads and parses a file.
// Errors: a missing file (NotFound naming the path); what ParsePlan reports.
absl::StatusOr<Plan> LoadPlanFile(const std::string& path);

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
};

// Binds every entry of `plan.tp` to the modules of `root` it matches (or,
// matching none, to the parameters it matches), in pre-order: a module, then
// the parameter entries of its slots.
// Errors: (each naming the value) a pattern matching no module or parameter,
// a module or parameter matched by two patterns, a parameter named by a
// parameter key and by its module's key (naming both), a style that does not
// fit the module's type (ParallelStyle::CheckFits: colwise/rowwise/
// loss_parallel need Linear, colwise/rowwise also accept Embedding;
// sequence_parallel needs RMSNorm, LayerNorm or Dropout; for a parameter
// key, its module's type), and
// tp_dim/dp_dim that are not dims of `mesh` (dp_dim only when dp is used).
absl::StatusOr<std::vector<ResolvedEntry>> ResolvePlan(const Plan& plan,
                                                       nn::Module& root,
                                                       const DeviceMesh& mesh);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PLAN_H_
