#ifndef DTENSOR_TOOLS_STEP_JSON_H_
#define DTENSOR_TOOLS_STEP_JSON_H_

#include "dtensor/redistribute/plan.h"
#include "nlohmann/json.hpp"

namespace dtensor {

// One redistribution step as `dtensor plan --json` and `dtensor propagate
// --json` print it:
// {"kind":"all_gather","mesh_dims":[0],"after":"R","bytes_per_rank":96,
//  "cost_us":7.2}.
nlohmann::ordered_json StepJson(const RedistributeStep& step);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_STEP_JSON_H_
