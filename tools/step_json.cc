#include "tools/step_json.h"

#include <string>

#include "dtensor/base/json_text.h"
#include "dtensor/redistribute/cost_model.h"

namespace dtensor {

nlohmann::ordered_json StepJson(const RedistributeStep& step) {
  return {{"kind", std::string(CommKindName(step.kind))},
          {"mesh_dims", step.mesh_dims},
          {"after", step.after.ToString()},
          {"bytes_per_rank", JsonNumber(step.bytes_per_rank)},
          {"cost_us", JsonNumber(step.cost_us)}};
}

}  // namespace dtensor
