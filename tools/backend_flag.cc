#include "tools/backend_flag.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// How --device names a device type.
std::string DeviceTypeName(DeviceType type) {
  return type == DeviceType::kCPU ? "cpu" : "cuda";
}

}  // namespace

absl::StatusOr<BackendDef> ParseBackendFlag(absl::string_view name,
                                            DeviceType device) {
  absl::StatusOr<BackendDef> def = BackendRegistry::Global().Find(name);
  if (!def.ok()) {
    return absl::Status(def.status().code(),
                        absl::StrCat("--backend: ", def.status().message()));
  }
  if (!def->RunsOn(device)) {
    std::vector<std::string> devices;
    for (DeviceType type : def->devices)
      devices.push_back(DeviceTypeName(type));
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend ", name, " does not run on ", DeviceTypeName(device),
        " tensors (it runs on ", absl::StrJoin(devices, ", "), ")"));
  }
  return def;
}

std::string BackendFlagValues() {
  return absl::StrJoin(BackendRegistry::Global().Names(), "|");
}

}  // namespace dtensor
