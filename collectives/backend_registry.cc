#include "dtensor/collectives/backend_registry.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/gloo/gloo_backend.h"
#include "dtensor/collectives/nccl/nccl_backend.h"

namespace dtensor {
namespace {

// The factory of a built-in multi-process backend: its options from the
// launcher's environment, then B::Create.
template <typename B, typename Options>
BackendFromEnv CreateFromEnv(
    absl::StatusOr<Options> (*options_from_env)(CommunicatorOptions)) {
  return [options_from_env](CommunicatorOptions communicator)
             -> absl::StatusOr<std::shared_ptr<Backend>> {
    DT_ASSIGN_OR_RETURN(Options options,
                        options_from_env(std::move(communicator)));
    return B::Create(std::move(options));
  };
}

BackendDef InProcess() {
  BackendDef def;
  def.devices = {DeviceType::kCPU, DeviceType::kCUDA};
  def.run = [](const RankLaunch& launch, const RankFunction& rank_main) {
    return LocalCluster(launch.world_size, launch.communicator, launch.device)
        .Run(rank_main);
  };
  return def;
}

void RegisterBuiltins(BackendRegistry& registry) {
  std::vector<std::pair<std::string, BackendDef>> builtins = {
      {"inprocess", InProcess()},
      {"gloo", ProcessPerRank(CreateFromEnv<GlooBackend>(GlooOptionsFromEnv),
                              {DeviceType::kCPU})},
      {"nccl", ProcessPerRank(CreateFromEnv<NcclBackend>(NcclOptionsFromEnv),
                              {DeviceType::kCUDA})},
  };
  for (auto& [name, def] : builtins) {
    // Cannot fail: distinct non-empty names, complete definitions.
    registry.Register(name, std::move(def)).IgnoreError();
  }
}

}  // namespace

bool BackendDef::RunsOn(DeviceType type) const {
  return std::find(devices.begin(), devices.end(), type) != devices.end();
}

BackendDef ProcessPerRank(BackendFromEnv from_env,
                          std::vector<DeviceType> devices) {
  BackendDef def;
  def.devices = std::move(devices);
  def.run = [from_env = std::move(from_env)](
                const RankLaunch& launch,
                const RankFunction& rank_main) -> absl::Status {
    DT_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend,
                        from_env(launch.communicator));
    ProcessGroups groups(std::move(backend));
    return rank_main(groups);
  };
  return def;
}

BackendRegistry& BackendRegistry::Global() {
  static BackendRegistry* registry = NewRegistryWith(RegisterBuiltins);
  return *registry;
}

absl::Status BackendRegistry::Register(std::string name, BackendDef def) {
  if (!def.run || def.devices.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend registry: backend \"", name, "\" has ",
                     def.run ? "no device" : "no run function"));
  }
  return defs_.Register(std::move(name), std::move(def));
}

absl::StatusOr<BackendDef> BackendRegistry::Find(absl::string_view name) const {
  return defs_.Find(name);
}

std::vector<std::string> BackendRegistry::Names() const {
  return defs_.Names();
}

}  // namespace dtensor
