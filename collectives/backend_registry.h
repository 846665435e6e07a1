#ifndef DTENSOR_COLLECTIVES_BACKEND_REGISTRY_H_
#define DTENSOR_COLLECTIVES_BACKEND_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/named_registry.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/tensor/device.h"

namespace dtensor {

// What a program asks of the backend its ranks run on.
struct RankLaunch {
  // The number of ranks of a backend whose ranks are threads of this process
  // (the in-process backend); one with a process per rank takes it from its
  // launcher.
  int64_t world_size = 1;
  // The options of every communicator.
  CommunicatorOptions communicator;
  // The device that ranks sharing this process put their tensors on; a
  // backend with a process per rank picks its own (Gloo the CPU, NCCL a GPU
  // by LOCAL_RANK), which a rank reads from its communicators' device().
  Device device = Device::CPU();
};

// One rank's part of an SPMD program, as LocalCluster runs it.
using RankFunction = LocalCluster::RankFunction;

// A backend as a program picks it by name: the devices it runs on and how
// this process runs its ranks on it.
struct BackendDef {
  // The device types of the tensors its communicators take.
  std::vector<DeviceType> devices;
  // Runs `rank_main` on every rank of the job that this process hosts.
  // Errors: the first rank's failure; those of joining the job.
  std::function<absl::Status(const RankLaunch& launch,
                             const RankFunction& rank_main)>
      run;

  bool RunsOn(DeviceType type) const;
};

// Makes the backend of this process's rank from the launcher's environment
// (dtensor/collectives/multiprocess/launch_env.h) with `communicator` as its
// communicators' options.
using BackendFromEnv = std::function<absl::StatusOr<std::shared_ptr<Backend>>(
    CommunicatorOptions communicator)>;

// The definition of a backend with one process per rank, started by a
// launcher (dtrun): `run` makes the process's backend with `from_env` and runs
// `rank_main` once, on it.
BackendDef ProcessPerRank(BackendFromEnv from_env,
                          std::vector<DeviceType> devices);

// Backends by the name a program's --backend flag gives them. Thread-safe.
class BackendRegistry {
 public:
  BackendRegistry() = default;
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  // The process's registry. It starts with the built-in backends, in this
  // order: inprocess (LocalCluster: a thread per rank; CPU or a shared CUDA
  // device), gloo (a process per rank over TCP; CPU) and nccl (a process and
  // a CUDA device per rank; reports at run time when built without CUDA).
  static BackendRegistry& Global();

  // Adds `def` under `name`.
  // Errors: InvalidArgument: an empty name, a null `run`, no device;
  //   AlreadyExists: a name already registered.
  absl::Status Register(std::string name, BackendDef def);

  // The backend `name`.
  // Errors: NotFound naming `name` and the registered names.
  absl::StatusOr<BackendDef> Find(absl::string_view name) const;

  // Every registered name, in registration order.
  std::vector<std::string> Names() const;

 private:
  NamedRegistry<BackendDef> defs_{"backend"};
};

// Registers a backend in BackendRegistry::Global() when constructed; a
// namespace-scope static of one makes a library's backend known to every
// program the library is linked into (mark the cc_library
// `alwayslink = True`):
//
//   const BackendRegistration kMine("mine", ProcessPerRank(MineFromEnv,
//                                                          {DeviceType::kCPU}));
//
// Registration never aborts: status() says whether it succeeded.
using BackendRegistration = GlobalRegistration<BackendRegistry, BackendDef>;

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_BACKEND_REGISTRY_H_
