#include "tools/mesh_flag.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "tools/arg_parser.h"

namespace dtensor {
namespace {

absl::string_view AsAbsl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

// Named sizes "dp=64,tp=8".
absl::Status ParseNamedSizes(std::string_view text, std::vector<int64_t>* sizes,
                             std::vector<std::string>* names) {
  for (absl::string_view item : absl::StrSplit(AsAbsl(text), ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, '=');
    int64_t size = 0;
    if (parts.size() != 2 || parts[0].empty() ||
        !absl::SimpleAtoi(parts[1], &size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mesh: malformed item '", item, "' in '", AsAbsl(text),
                       "' (expected name=size)"));
    }
    names->emplace_back(parts[0]);
    sizes->push_back(size);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceMesh> ParseMeshFlag(std::string_view text) {
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  if (text.find('=') != std::string_view::npos) {
    DT_RETURN_IF_ERROR(ParseNamedSizes(text, &sizes, &names));
  } else {
    DT_ASSIGN_OR_RETURN(sizes, ParseIntList(text, 'x', "--mesh"));
  }
  int64_t ranks = 1;
  for (int64_t size : sizes) {
    if (size < 1) break;  // DeviceMesh::Create names it.
    if (size > kMaxFlagMeshRanks / ranks) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mesh ", AsAbsl(text), " has more than ",
                       kMaxFlagMeshRanks, " ranks"));
    }
    ranks *= size;
  }
  return DeviceMesh::Create(std::move(sizes), std::move(names));
}

absl::StatusOr<std::vector<double>> ParsePerMeshDimFlag(std::string_view text,
                                                        int64_t mesh_ndim,
                                                        std::string_view what) {
  std::vector<double> values;
  for (absl::string_view item : absl::StrSplit(AsAbsl(text), ',')) {
    double value = 0;
    if (!absl::SimpleAtod(item, &value) || !(value >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          AsAbsl(what), ": '", item, "' is not a non-negative number"));
    }
    values.push_back(value);
  }
  if (values.size() == 1) values.assign(mesh_ndim, values[0]);
  if (static_cast<int64_t>(values.size()) != mesh_ndim) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(what), " '", AsAbsl(text), "' has ", values.size(),
                     " values for a mesh of ", mesh_ndim, " dims"));
  }
  return values;
}

}  // namespace dtensor
