#ifndef DTENSOR_TOOLS_PLAN_COMMAND_H_
#define DTENSOR_TOOLS_PLAN_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace dtensor {

// `dtensor plan --mesh 2x2 --shape 8,8 [--dtype f32] --from "S(0),S(1)"
//               --to "S(1),S(0)" [--bandwidth GBps,...] [--latency us,...]
//               [--verify] [--json]`
// Prints the cheapest redistribution plan: each step (kind, mesh dims, tensor
// dims, layout after it, bytes received per rank, cost) and the total.
// --bandwidth and --latency set each mesh dim's link (one value per mesh dim,
// or one for all); --latency is the per-hop latency. --verify runs the plan on
// in-process ranks with random data and compares every rank's result with
// the reference slice of the full tensor. --json prints one line:
// {"steps":[{"kind":"all_gather","mesh_dims":[1],"after":"S(1),R",
// "bytes_per_rank":256,"cost_us":8.3}],"total_cost_us":...,
// "collectives":<non-local steps>,"verified":true} ("verified" only with
// --verify). Returns kExitOk; 1 when verification fails; kExitUsage after a
// one-line error for bad arguments.
int RunPlanCommand(absl::Span<const std::string> args, std::ostream& out,
                   std::ostream& err);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_PLAN_COMMAND_H_
