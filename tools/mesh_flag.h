#ifndef DTENSOR_TOOLS_MESH_FLAG_H_
#define DTENSOR_TOOLS_MESH_FLAG_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/mesh/device_mesh.h"

namespace dtensor {

// The most ranks a --mesh flag may describe: a larger mesh is almost surely a
// typo, and some subcommands print a line per rank.
inline constexpr int64_t kMaxFlagMeshRanks = int64_t{1} << 16;

// Parses a --mesh flag: sizes separated by 'x' ("4x2", "8"; dims named d0,
// d1, ...) or named sizes separated by ',' ("dp=64,tp=8"). Ranks are 0..N-1,
// row-major.
// Errors: InvalidArgument naming the text.
absl::StatusOr<DeviceMesh> ParseMeshFlag(std::string_view text);

// Parses a per-mesh-dim list of positive numbers ("--bandwidth 87.7,10"):
// one value per mesh dim, or a single value for all of them.
absl::StatusOr<std::vector<double>> ParsePerMeshDimFlag(std::string_view text,
                                                        int64_t mesh_ndim,
                                                        std::string_view what);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_MESH_FLAG_H_
