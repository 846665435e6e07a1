// The launcher's environment for the NCCL backend; built with or without
// CUDA.
#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/multiprocess/launch_env.h"
#include "dtensor/collectives/nccl/nccl_backend.h"

namespace dtensor {

absl::StatusOr<NcclBackendOptions> NcclOptionsFromEnv(
    CommunicatorOptions communicator) {
  DT_ASSIGN_OR_RETURN(LaunchEnv env, LaunchEnvFromEnvironment());
  NcclBackendOptions options;
  SetJobFromLaunchEnv(env, std::move(communicator), options);
  options.local_rank = env.local_rank;
  return options;
}

}  // namespace dtensor
