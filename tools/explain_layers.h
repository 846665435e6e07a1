#ifndef DTENSOR_TOOLS_EXPLAIN_LAYERS_H_
#define DTENSOR_TOOLS_EXPLAIN_LAYERS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "dtensor/parallel/plan.h"
#include "tools/explain.h"

namespace dtensor {

// What one explained step gives: the report and its warnings with their
// repeat counts (report.warnings is WarningLines(warnings)).
struct ExplainRun {
  ExplainReport report;
  std::vector<std::pair<std::string, int64_t>> warnings;
};

// "text" once, "text (xN)" for repeats, in first-seen order.
std::vector<std::string> WarningLines(
    const std::vector<std::pair<std::string, int64_t>>& warnings);

// Whether one part of a module name is a layer index ("17" in
// "layers.17.attention").
bool IsLayerIndex(absl::string_view part);

// Whether every Transformer block gets the same treatment from `plan`: no
// pattern (tp or activation_checkpoint) names one layer by number
// ("layers.3.attention.wq"), so the blocks differ only in their index.
bool PlanTreatsLayersAlike(const parallel::Plan& plan);

// The report of an `n_layers`-layer model from those of the same model with
// 2 and 3 layers (n_layers > 3). The blocks are identical, so each one adds
// the same collectives, bytes, memory and warnings: totals, memory and
// warning counts grow by (3-layer - 2-layer) per extra layer; the module
// list repeats the middle block of the 3-layer model (its names renumbered)
// between the first and the last block. Costs time linear in the output,
// not in running the extra layers.
ExplainRun ExtrapolateLayers(const ExplainRun& two, const ExplainRun& three,
                             int64_t n_layers);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_EXPLAIN_LAYERS_H_
