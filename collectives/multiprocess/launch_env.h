#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_LAUNCH_ENV_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_LAUNCH_ENV_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace dtensor {

// The environment a launcher (tools/dtrun, or torchrun-style tooling) gives
// each process of a multi-process job.
inline constexpr char kRankEnv[] = "RANK";
inline constexpr char kWorldSizeEnv[] = "WORLD_SIZE";
inline constexpr char kLocalRankEnv[] = "LOCAL_RANK";
inline constexpr char kLocalWorldSizeEnv[] = "LOCAL_WORLD_SIZE";
inline constexpr char kMasterAddrEnv[] = "MASTER_ADDR";
inline constexpr char kMasterPortEnv[] = "MASTER_PORT";
// "1" when the launcher hosts the rendezvous store at MASTER_ADDR:MASTER_PORT
// (dtrun does); otherwise rank 0 hosts it.
inline constexpr char kAgentStoreEnv[] = "DTENSOR_AGENT_STORE";

// One process's place in a job, as its launcher described it.
struct LaunchEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  // The process's index among those of its node, and their number.
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  // Where the rendezvous store listens.
  std::string master_addr;
  int master_port = 0;
  // Whether the launcher hosts the store (else rank 0 does).
  bool agent_store = false;
  // The job's secret that the store asks of its clients (store_secret.h);
  // empty: none.
  std::string store_secret;
};

// Reads the variables above. RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
// are required; LOCAL_RANK and LOCAL_WORLD_SIZE default to RANK and
// WORLD_SIZE; the store's secret comes from DTENSOR_STORE_SECRET or
// DTENSOR_STORE_SECRET_FILE (StoreSecretFromEnvironment).
// Errors: FailedPrecondition naming a required variable that is not set, or
// a secret file that cannot be read;
// InvalidArgument naming a variable and its value that is out of range.
absl::StatusOr<LaunchEnv> LaunchEnvFromEnvironment();

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_LAUNCH_ENV_H_
