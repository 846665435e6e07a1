#ifndef DTENSOR_TOOLS_TENSOR_FLAGS_H_
#define DTENSOR_TOOLS_TENSOR_FLAGS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/tensor/dtype.h"
#include "tools/arg_parser.h"

namespace dtensor {

// A tensor on a mesh as a subcommand's --mesh, --shape and --dtype flags give
// it, with the values of the subcommand's other required flags.
struct TensorFlags {
  DeviceMesh mesh;
  std::vector<int64_t> shape;
  DType dtype;
  // The values of `also_required` (ParseTensorFlags), in its order.
  std::vector<std::string> required;
};

// Reads --mesh (ParseMeshFlag), --shape (sizes separated by ',') and --dtype
// (f32 when absent). A missing flag is reported before a malformed one, as
// the subcommands always have: first a missing --mesh, --shape or flag of
// `also_required` (in that order), then an error of --mesh, --shape, --dtype.
absl::StatusOr<TensorFlags> ParseTensorFlags(
    const ParsedArgs& args, absl::Span<const std::string_view> also_required);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_TENSOR_FLAGS_H_
