#ifndef DTENSOR_TOOLS_BACKEND_FLAG_H_
#define DTENSOR_TOOLS_BACKEND_FLAG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/collectives/backend_registry.h"
#include "dtensor/tensor/device.h"

namespace dtensor {

// The backend a --backend flag names (BackendRegistry::Global()), to run
// ranks whose tensors are on `device`.
// Errors: NotFound naming the flag's value and the registered backends;
// InvalidArgument naming the backend, `device` and the devices it runs on.
absl::StatusOr<BackendDef> ParseBackendFlag(absl::string_view name,
                                            DeviceType device);

// The registered backends as a usage text lists a flag's values:
// "inprocess|gloo|nccl".
std::string BackendFlagValues();

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_BACKEND_FLAG_H_
