#include "tools/tensor_flags.h"

#include <utility>

#include "dtensor/base/status_macros.h"
#include "tools/mesh_flag.h"

namespace dtensor {

absl::StatusOr<TensorFlags> ParseTensorFlags(
    const ParsedArgs& args, absl::Span<const std::string_view> also_required) {
  DT_ASSIGN_OR_RETURN(std::string mesh_text, args.Required("mesh"));
  DT_ASSIGN_OR_RETURN(std::string shape_text, args.Required("shape"));
  std::vector<std::string> required;
  for (std::string_view name : also_required) {
    DT_ASSIGN_OR_RETURN(std::string value, args.Required(name));
    required.push_back(std::move(value));
  }
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag(mesh_text));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                      ParseIntList(shape_text, ',', "--shape"));
  DT_ASSIGN_OR_RETURN(DType dtype, ParseDType(args.ValueOr("dtype", "f32")));
  return TensorFlags{std::move(mesh), std::move(shape), dtype,
                     std::move(required)};
}

}  // namespace dtensor
