#include "dtensor/collectives/multiprocess/launch_env.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/multiprocess/store_secret.h"

namespace dtensor {
namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 24;

// A launcher's names for the four figures of a process's place.
struct Launcher {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};
constexpr Launcher kLaunchers[] = {
    {"torchrun", kRankEnv, kWorldSizeEnv, kLocalRankEnv, kLocalWorldSizeEnv},
    {"slurm", kSlurmProcIdEnv, kSlurmNTasksEnv, kSlurmLocalIdEnv,
     kSlurmTasksPerNodeEnv},
    {"openmpi", kOmpiRankEnv, kOmpiSizeEnv, kOmpiLocalRankEnv,
     kOmpiLocalSizeEnv},
};

// `name`'s value, nullopt when unset or empty.
std::optional<std::string> Get(const EnvLookup& lookup, const char* name) {
  std::optional<std::string> value = lookup(name);
  if (value.has_value() && value->empty()) return std::nullopt;
  return value;
}

absl::StatusOr<std::string> Required(const EnvLookup& lookup,
                                     const char* name) {
  std::optional<std::string> value = Get(lookup, name);
  if (!value.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment variable ", name,
        " is not set (start the processes with dtrun, torchrun, srun or "
        "mpirun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)"));
  }
  return *value;
}

// The integer in `text` (variable `name`), within [low, high].
absl::StatusOr<int64_t> ParseInRange(const char* name, const std::string& text,
                                     int64_t low, int64_t high) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "=\"", text,
                     "\" is not an integer in [", low, ", ", high, "]"));
  }
  return value;
}

// The launcher whose rank or world size variable is set; torchrun's (whose
// errors name RANK) when none is.
const Launcher& LauncherOf(const EnvLookup& lookup) {
  for (const Launcher& launcher : kLaunchers) {
    if (Get(lookup, launcher.rank) || Get(lookup, launcher.world_size)) {
      return launcher;
    }
  }
  return kLaunchers[0];
}

// SLURM_NTASKS_PER_NODE: "4" or "4(x3)" (every node the same) is the local
// world size; an uneven "2(x3),1" says nothing of this node: nullopt.
std::optional<std::string> SlurmTasksPerNode(const std::string& text) {
  const size_t end = text.find_first_of("(,");
  if (end != std::string::npos && text.find(',') != std::string::npos) {
    return std::nullopt;
  }
  return text.substr(0, end);
}

// Rank, world size, local rank and local world size from `launcher`'s
// variables.
absl::Status ReadPlace(const EnvLookup& lookup, const Launcher& launcher,
                       LaunchEnv& env) {
  DT_ASSIGN_OR_RETURN(std::string text, Required(lookup, launcher.world_size));
  DT_ASSIGN_OR_RETURN(env.world_size,
                      ParseInRange(launcher.world_size, text, 1, kMaxRanks));
  DT_ASSIGN_OR_RETURN(text, Required(lookup, launcher.rank));
  DT_ASSIGN_OR_RETURN(env.rank,
                      ParseInRange(launcher.rank, text, 0, env.world_size - 1));
  std::optional<std::string> local_world =
      Get(lookup, launcher.local_world_size);
  if (local_world && launcher.local_world_size == kSlurmTasksPerNodeEnv) {
    local_world = SlurmTasksPerNode(*local_world);
  }
  env.local_world_size = env.world_size;
  if (local_world.has_value()) {
    DT_ASSIGN_OR_RETURN(env.local_world_size,
                        ParseInRange(launcher.local_world_size, *local_world, 1,
                                     env.world_size));
  }
  const std::optional<std::string> local_rank =
      Get(lookup, launcher.local_rank);
  env.local_rank = env.rank;
  if (local_rank.has_value()) {
    DT_ASSIGN_OR_RETURN(env.local_rank,
                        ParseInRange(launcher.local_rank, *local_rank, 0,
                                     env.local_world_size - 1));
  }
  return absl::OkStatus();
}

// The store's address when MASTER_ADDR is not set (see LaunchEnvFrom).
absl::StatusOr<std::string> DefaultMasterAddr(const EnvLookup& lookup,
                                              const LaunchEnv& env) {
  if (env.launcher == "slurm") {
    for (const char* name : {kSlurmStepNodeListEnv, kSlurmNodeListEnv}) {
      if (std::optional<std::string> nodes = Get(lookup, name)) {
        return FirstSlurmHost(*nodes);
      }
    }
    if (std::optional<std::string> node = Get(lookup, kSlurmLaunchNodeEnv)) {
      return *node;
    }
  }
  if (env.launcher == "openmpi" && env.local_world_size == env.world_size) {
    return std::string("127.0.0.1");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "environment variable ", kMasterAddrEnv, " is not set",
      env.launcher == "torchrun"
          ? " (start the processes with dtrun, torchrun, srun or mpirun, or "
            "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)"
          : absl::StrCat(" and ", env.launcher,
                         "'s variables name no host of rank 0 (a job of ",
                         env.world_size, " ranks, ", env.local_world_size,
                         " on this node): set it to rank 0's host")));
}

}  // namespace

absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist) {
  std::string host;
  int depth = 0;
  bool in_range = false;  // Inside brackets, past the first range's start.
  for (const char c : nodelist) {
    if (c == '[') {
      if (depth++ != 0) break;
      in_range = false;
    } else if (c == ']') {
      if (--depth != 0) break;
    } else if (depth == 1) {
      if (c == '-' || c == ',') in_range = true;
      if (!in_range) host += c;
    } else if (c == ',') {
      break;
    } else {
      host += c;
    }
  }
  if (depth != 0 || host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm node list \"", nodelist,
                     "\" has no first host (expected \"node[01-04],other\")"));
  }
  return host;
}

absl::StatusOr<LaunchEnv> LaunchEnvFrom(const EnvLookup& lookup) {
  LaunchEnv env;
  const Launcher& launcher = LauncherOf(lookup);
  env.launcher = launcher.name;
  DT_RETURN_IF_ERROR(ReadPlace(lookup, launcher, env));
  const bool torchrun = env.launcher == "torchrun";
  if (std::optional<std::string> addr = Get(lookup, kMasterAddrEnv)) {
    env.master_addr = *addr;
  } else {
    DT_ASSIGN_OR_RETURN(env.master_addr, DefaultMasterAddr(lookup, env));
  }
  std::optional<std::string> port = Get(lookup, kMasterPortEnv);
  if (!port.has_value() && torchrun) {
    DT_ASSIGN_OR_RETURN(port, Required(lookup, kMasterPortEnv));
  }
  env.master_port = kDefaultMasterPort;
  if (port.has_value()) {
    DT_ASSIGN_OR_RETURN(int64_t value,
                        ParseInRange(kMasterPortEnv, *port, 1, 65535));
    env.master_port = static_cast<int>(value);
  }
  env.agent_store = Get(lookup, kAgentStoreEnv).value_or("") == "1";
  return env;
}

absl::StatusOr<LaunchEnv> LaunchEnvFromEnvironment() {
  DT_ASSIGN_OR_RETURN(
      LaunchEnv env,
      LaunchEnvFrom([](const char* name) -> std::optional<std::string> {
        const char* value = std::getenv(name);
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      }));
  DT_ASSIGN_OR_RETURN(env.store_secret, StoreSecretFromEnvironment());
  return env;
}

}  // namespace dtensor
