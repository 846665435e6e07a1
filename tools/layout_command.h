#ifndef DTENSOR_TOOLS_LAYOUT_COMMAND_H_
#define DTENSOR_TOOLS_LAYOUT_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace dtensor {

// `dtensor layout --mesh 4x2 --shape 18,2 --placements "S(0),S(0)"
//                 [--dtype f32] [--json]`
// Prints, for every rank of the mesh (row-major), its mesh coordinate, local
// shape, global offset and replica index, then a picture of which ranks hold
// which block (1-D and 2-D tensors). With --json prints one line:
// {"mesh":[4,2],"shape":[18,2],"placements":"S(0),S(0)","ranks":[{"rank":0,
// "coord":[0,0],"local_shape":[3,2],"global_offset":[0,0]},...]}
// `args` are the arguments after "layout". Returns kExitOk, or kExitUsage
// after a one-line error on `err` for bad arguments.
int RunLayoutCommand(absl::Span<const std::string> args, std::ostream& out,
                     std::ostream& err);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_LAYOUT_COMMAND_H_
