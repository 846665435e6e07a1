#ifndef DTENSOR_TOOLS_PROPAGATE_COMMAND_H_
#define DTENSOR_TOOLS_PROPAGATE_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace dtensor {

// `dtensor propagate --mesh 4 --op mm --in "12x8:S(0)" --in "8x4:R"
//                    [--arg dims=0,1 ...] [--dtype f32] [--bandwidth GBps,...]
//                    [--latency us,...] [--json]`
// `dtensor propagate --list`
// Propagates one op call in metadata-only mode and prints the chosen
// strategy, each input's redistribution (steps and cost), and the output
// shapes and layouts. Each --in is "SHAPE:LAYOUT[:DTYPE]": sizes separated
// by 'x' (empty for a 0-d tensor), one placement per mesh dim as for
// `dtensor plan`, and a dtype overriding --dtype (default f32). --arg sets a
// named argument of the op (see --list). --json prints one line:
// {"op":"mm","output":{"shape":[12,4],"placements":"S(0)"},
//  "redistributions":[{"input":0,"from":"S(0)","to":"S(0)","steps":[...],
//  "cost_us":0},...],"collectives":{"all_gather":0,"all_reduce":0,
//  "reduce_scatter":0,"all_to_all":0,"permute":0},"cost_us":0}
// with "outputs" (every output) after "output" for ops with several outputs,
// and "kernel_collectives" after "redistributions" for ops whose kernel
// communicates. Returns kExitOk; kExitUsage after a one-line error for bad
// arguments (an unknown op, a malformed --in, a call the op rejects).
int RunPropagateCommand(absl::Span<const std::string> args, std::ostream& out,
                        std::ostream& err);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_PROPAGATE_COMMAND_H_
