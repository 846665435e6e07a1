#include "tools/link_flags.h"

#include <string>
#include <string_view>

#include "dtensor/base/status_macros.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

// Sets `field` of every mesh dim's link from flag `name` (one value per mesh
// dim, or one for all) when the flag was given.
absl::Status SetFromFlag(const ParsedArgs& args, std::string_view name,
                         double MeshDimLink::*field,
                         std::vector<MeshDimLink>& links) {
  if (!args.Has(name)) return absl::OkStatus();
  const int64_t mesh_ndim = static_cast<int64_t>(links.size());
  DT_ASSIGN_OR_RETURN(std::vector<double> values,
                      ParsePerMeshDimFlag(args.ValueOr(name, ""), mesh_ndim,
                                          "--" + std::string(name)));
  for (int64_t m = 0; m < mesh_ndim; ++m) links[m].*field = values[m];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<MeshDimLink>> LinksFromFlags(
    const ParsedArgs& args, const DeviceMesh& mesh) {
  std::vector<MeshDimLink> links(mesh.ndim());
  DT_RETURN_IF_ERROR(
      SetFromFlag(args, "bandwidth", &MeshDimLink::bandwidth_gbps, links));
  DT_RETURN_IF_ERROR(
      SetFromFlag(args, "latency", &MeshDimLink::hop_latency_us, links));
  // Validates the links (a zero bandwidth is an error).
  DT_RETURN_IF_ERROR(CostModel::Create(links).status());
  return links;
}

}  // namespace dtensor
