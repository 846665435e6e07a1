#ifndef DTENSOR_TOOLS_LINK_FLAGS_H_
#define DTENSOR_TOOLS_LINK_FLAGS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/mesh/device_mesh.h"
#include "tools/arg_parser.h"

namespace dtensor {

// The links of `mesh`'s dims from the flags `--bandwidth` (GB/s per mesh
// dim, "87.7,10") and `--latency` (us per hop per mesh dim): one link per
// mesh dim, defaults where a flag is absent.
// Errors: InvalidArgument naming the flag: a list of another length than the
// mesh's dims, a value that is not a positive number, links the cost model
// rejects.
absl::StatusOr<std::vector<MeshDimLink>> LinksFromFlags(const ParsedArgs& args,
                                                        const DeviceMesh& mesh);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_LINK_FLAGS_H_
