#include "dtensor/redistribute/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dtensor {

std::string RedistributeStep::ToString() const {
  return absl::StrFormat(
      "%s mesh_dims=[%s] tensor_dims=[%s]: %s -> %s (%.0f bytes/rank, %.2f us)",
      CommKindName(kind), absl::StrJoin(mesh_dims, ","),
      absl::StrJoin(tensor_dims, ","), before.ToString(), after.ToString(),
      bytes_per_rank, cost_us);
}

int64_t RedistributePlan::num_collectives() const {
  int64_t count = 0;
  for (const RedistributeStep& step : steps) {
    if (step.kind != CommKind::kLocal) ++count;
  }
  return count;
}

std::string RedistributePlan::ToString() const {
  std::string text;
  for (const RedistributeStep& step : steps) {
    absl::StrAppend(&text, step.ToString(), "\n");
  }
  absl::StrAppendFormat(&text, "total %.2f us, %d collective(s)\n",
                        total_cost_us, num_collectives());
  return text;
}

}  // namespace dtensor
