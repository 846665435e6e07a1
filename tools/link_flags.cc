#include "tools/link_flags.h"

#include "base/status_macros.h"
#include "tools/mesh_flag.h"

namespace dtensor {

absl::StatusOr<std::vector<MeshDimLink>> LinksFromFlags(
    const ParsedArgs& args, const DeviceMesh& mesh) {
  std::vector<MeshDimLink> links(mesh.ndim());
  if (args.Has("bandwidth")) {
    DT_ASSIGN_OR_RETURN(std::vector<double> bandwidths,
                        ParsePerMeshDimFlag(args.ValueOr("bandwidth", ""),
                                            mesh.ndim(), "--bandwidth"));
    for (int64_t m = 0; m < mesh.ndim(); ++m) {
      links[m].bandwidth_gbps = bandwidths[m];
    }
  }
  if (args.Has("latency")) {
    DT_ASSIGN_OR_RETURN(std::vector<double> latencies,
                        ParsePerMeshDimFlag(args.ValueOr("latency", ""),
                                            mesh.ndim(), "--latency"));
    for (int64_t m = 0; m < mesh.ndim(); ++m) {
      links[m].hop_latency_us = latencies[m];
    }
  }
  // Validates the links (a zero bandwidth is an error).
  DT_RETURN_IF_ERROR(CostModel::Create(links).status());
  return links;
}

}  // namespace dtensor
