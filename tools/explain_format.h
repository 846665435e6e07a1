#ifndef DTENSOR_TOOLS_EXPLAIN_FORMAT_H_
#define DTENSOR_TOOLS_EXPLAIN_FORMAT_H_

#include <string>

#include "tools/explain.h"

namespace dtensor {

// The report as tables for people: the step's totals, memory per rank (and
// per device, given a capacity), warnings, then one block per module with
// parameters or collectives.
std::string ExplainText(const ExplainReport& report);

// The report as one JSON object on one line (docs/explain.md gives the
// format, which is stable):
// {"model":"llama","config":..,"mesh":{"shape":[..],"dim_names":[..]},
//  "plan":..,"batch":..,"seq":..,"dtype":..,"rank":..,
//  "modules":[{"name","type","parameters":[{"name","shape","layout",
//  "local_shape"}],"activations":{"input":{"shape","layout","local_shape"}
//  |null,"output":..},"forward":[{"kind","mesh_dims","bytes_per_rank",
//  "time_us","count"}],"backward":[..]}],
//  "totals":{"forward":T,"backward":T,"optimizer":T,"step":T},
//  "memory_per_rank":{"parameters","gradients","optimizer_state",
//  "peak_activations","total"},["memory_per_device":{"capacity","peak",
//  "headroom","fits"},]"warnings":[..]}
// with T = {"by_kind":{"all_gather":{"count","bytes_per_rank","time_us"},
// ...every kind},"collectives","bytes_per_rank","time_us"}; memory_per_device
// only when the report has a device capacity (--device-memory).
std::string ExplainJson(const ExplainReport& report);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_EXPLAIN_FORMAT_H_
