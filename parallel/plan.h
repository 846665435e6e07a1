#ifndef DTENSOR_PARALLEL_PLAN_H_
#define DTENSOR_PARALLEL_PLAN_H_

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/parallel/activation_checkpoint_plan.h"
#include "dtensor/parallel/context_parallel.h"
#include "dtensor/parallel/mixed_precision_policy.h"
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
//    "fsdp_groups": ["layers.*"], "fsdp_prefetch": true,
//    "activation_checkpoint": ["layers.*"],
//    "mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "f32"},
//    "context_parallel": {"mesh_dim": "cp", "order": "balanced"}}
// "tp_dim"/"dp_dim" default to "tp"/"dp"; "tp" defaults to {} and "dp" to
// "none"; "bucket_mb" (the size of the gradient buckets whose all-reduces
// overlap the backward pass, dtensor/parallel/gradient_buckets.h) to 25 and
// "first_bucket_mb" (the first bucket's, as DDP's first_bucket_bytes) to 1;
// "fsdp_groups" (module-name patterns) to [] and "fsdp_prefetch" to true,
// both only with "dp": "fsdp"; "mixed_precision" (a MixedPrecisionPolicy,
// dtensor/parallel/mixed_precision_policy.h; keys param_dtype, reduce_dtype,
// output_dtype, each "f32" or "bf16") to none; "context_parallel"
// (dtensor/parallel/context_parallel.h) is off unless given.
// Entries keep file order.
// An entry's pattern names modules, or, when it matches no module,
// parameters ("layers.*.mlp.up_proj.weight", as Hugging Face's tp_plan
// allows): the style then places those parameters alone (as for their
// module) and adds no hooks. `style` is the style object: ParsePlan makes it
// from `spec` through the registry; a plan built in code may set it directly
// (then `spec` is not used), or leave it null to have StyleOf (so ResolvePlan,
// dtensor/parallel/plan_resolution.h) make it from `spec`.
//
// In code, an entry is a pattern and a style value, as PyTorch's plan dict:
//
//   parallel::Plan plan = parallel::Plan::Of(
//       {{"0", parallel::ColwiseParallel()},
//        {"2", parallel::RowwiseParallel()}},
//       parallel::DataParallel::kReplicate);
struct PlanEntry {
  PlanEntry() = default;
  PlanEntry(std::string pattern, std::shared_ptr<const ParallelStyle> style)
      : pattern(std::move(pattern)), style(std::move(style)) {}
  // `style` is any ParallelStyle value (ColwiseParallel(options), ...).
  template <typename S,
            typename = std::enable_if_t<std::is_base_of_v<ParallelStyle, S>>>
  PlanEntry(std::string pattern, S style)
      : pattern(std::move(pattern)),
        style(std::make_shared<const S>(std::move(style))) {}

  std::string pattern;
  StyleSpec spec;
  std::shared_ptr<const ParallelStyle> style;
};
struct Plan {
  // The plan of `tp` entries (in order) and data parallelism `dp`, other
  // fields at their defaults.
  static Plan Of(std::vector<PlanEntry> tp,
                 DataParallel dp = DataParallel::kNone) {
    Plan plan;
    plan.tp = std::move(tp);
    plan.dp = dp;
    return plan;
  }

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
  // "activation_checkpoint": the modules checkpointed (none by default) and
  // the mode (dtensor/parallel/activation_checkpoint_plan.h).
  ActivationCheckpointPlan activation_checkpoint;
  // Parameters computed (and FSDP-gathered) in param_dtype, gradients
  // reduced in reduce_dtype; the masters keep their dtype.
  std::optional<MixedPrecisionPolicy> mixed_precision;
  // Unset: no context parallelism.
  std::optional<ContextParallelPlan> context_parallel;
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

// The style object of `entry`: `entry.style` when set, else made by
// StyleRegistry::Global() from `entry.spec`.
// Errors: an unknown style name or an option the style does not take
// (InvalidArgument naming the pattern).
absl::StatusOr<std::shared_ptr<const ParallelStyle>> StyleOf(
    const PlanEntry& entry);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PLAN_H_
