#ifndef DTENSOR_PARALLEL_PLAN_H_
#define DTENSOR_PARALLEL_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mesh/device_mesh.h"
#include "nn/module.h"

namespace dtensor {
namespace parallel {

// How one module is split over the tensor-parallel mesh dim.
enum class Style {
  kColwise,           // Linear/Embedding: weight split on output features.
  kRowwise,           // Linear/Embedding: weight split on input features.
  kSequenceParallel,  // Norm/Dropout: runs on sequence-sharded activations.
  kPrepareInput,      // Any module: redistributes its input.
  kPrepareOutput,     // Any module: redistributes its output.
  kLossParallel,      // The final Linear: logits stay sharded on vocab.
};

// "colwise", "rowwise", ... as written in plan files.
absl::string_view StyleName(Style style);

// One entry of the "tp" object: a style with its options. Layouts are the
// placement on the tp mesh dim ("R", "S(1)", "S(-1)"), parsed against the
// tensor when the plan is applied.
struct StyleSpec {
  Style style = Style::kColwise;
  // The layout of the module's input on the tp dim: the target it is
  // redistributed to (sequence_parallel, prepare_input), and for every style
  // how a tp-local input (see use_local_output) is read: it is wrapped onto
  // the full mesh with this placement (default: the style's input layout,
  // colwise R, rowwise S(-1), sequence_parallel S(1)), like PyTorch's
  // from_local in its input preparation.
  std::optional<std::string> input_layouts;
  std::optional<std::string> output_layouts;
  // Whether the module's output is handed on as its tp-local value (true:
  // the rank's shard along the tp dim, as a DTensor on the mesh with the tp
  // dim cut to the rank's coordinate; parallel/tp_local.h) or as the global
  // DTensor (false). The default is false, unlike PyTorch's true: our modules
  // compute on global shapes (Attention reshapes by the global head count),
  // so a local value fits only between modules that expect one, such as a
  // colwise Linear whose output an elementwise module transforms before a
  // rowwise Linear wraps it again (its input_layouts).
  bool use_local_output = false;
};

enum class DataParallel { kNone, kReplicate, kFsdp };
absl::string_view DataParallelName(DataParallel dp);

// A parsed plan file:
//   {"tp_dim": "tp", "dp_dim": "dp",
//    "tp": {"layers.*.attention.wq": "colwise",
//           "output": {"style": "colwise", "output_layouts": "S(-1)",
//                      "use_local_output": false}},
//    "dp": "fsdp" | "replicate" | "none",
//    "bucket_mb": 25}
// "tp_dim"/"dp_dim" default to "tp"/"dp"; "tp" defaults to {} and "dp" to
// "none"; "bucket_mb" (the size of the gradient buckets whose all-reduces
// overlap the backward pass, parallel/gradient_buckets.h) to 25. Entries
// keep file order.
struct PlanEntry {
  std::string pattern;
  StyleSpec spec;
};
struct Plan {
  std::string tp_dim = "tp";
  std::string dp_dim = "dp";
  std::vector<PlanEntry> tp;
  DataParallel dp = DataParallel::kNone;
  int64_t bucket_bytes = int64_t{25} << 20;
};

// Parses plan text.
// Errors: unknown top-level keys, styles, options or dp modes, wrong JSON
// types (InvalidArgument naming the bad key or value).
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

// A plan entry bound to the module it applies to.
struct ResolvedEntry {
  std::string fqn;
  nn::Module* module;
  const PlanEntry* entry;
};

// Binds every entry of `plan.tp` to the modules of `root` it matches, in
// pre-order.
// Errors: (each naming the value) a pattern matching no module, a module
// matched by two patterns, a style that does not fit the module's type
// (colwise/rowwise/loss_parallel need Linear, colwise/rowwise also accept
// Embedding; sequence_parallel needs RMSNorm, LayerNorm or Dropout), and
// tp_dim/dp_dim that are not dims of `mesh` (dp_dim only when dp is used).
absl::StatusOr<std::vector<ResolvedEntry>> ResolvePlan(const Plan& plan,
                                                       nn::Module& root,
                                                       const DeviceMesh& mesh);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PLAN_H_
