#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_LAUNCH_ENV_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_LAUNCH_ENV_H_

#include <cstdint>
#include <functional>
#include <optional>
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

// What Slurm's srun gives each task, read when RANK and WORLD_SIZE are not
// set: the task's rank, the task count, its rank on its node, the tasks per
// node ("4", or "2(x3),1" for uneven nodes: then the local world size is the
// world's), the nodes of the step (rank 0 runs on the first under srun's
// default block distribution) and the node srun ran on.
inline constexpr char kSlurmProcIdEnv[] = "SLURM_PROCID";
inline constexpr char kSlurmNTasksEnv[] = "SLURM_NTASKS";
inline constexpr char kSlurmLocalIdEnv[] = "SLURM_LOCALID";
inline constexpr char kSlurmTasksPerNodeEnv[] = "SLURM_NTASKS_PER_NODE";
inline constexpr char kSlurmStepNodeListEnv[] = "SLURM_STEP_NODELIST";
inline constexpr char kSlurmNodeListEnv[] = "SLURM_NODELIST";
inline constexpr char kSlurmLaunchNodeEnv[] = "SLURM_LAUNCH_NODE_IPADDR";
// What Open MPI's mpirun gives each process, read when neither torchrun's
// nor Slurm's variables are set.
inline constexpr char kOmpiRankEnv[] = "OMPI_COMM_WORLD_RANK";
inline constexpr char kOmpiSizeEnv[] = "OMPI_COMM_WORLD_SIZE";
inline constexpr char kOmpiLocalRankEnv[] = "OMPI_COMM_WORLD_LOCAL_RANK";
inline constexpr char kOmpiLocalSizeEnv[] = "OMPI_COMM_WORLD_LOCAL_SIZE";
// MASTER_PORT when a Slurm or Open MPI job does not set it: torchrun's
// default.
inline constexpr int kDefaultMasterPort = 29500;

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
  // Whose variables gave the rank: "torchrun" (RANK: dtrun, torchrun),
  // "slurm" or "openmpi".
  std::string launcher = "torchrun";
};

// The value of an environment variable, nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The job as the variables `lookup` gives describe it (the store's secret
// aside). The rank, world size, local rank and local world size come from
// the first launcher whose variables are set:
//   torchrun (dtrun)  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   Slurm (srun)      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//                     SLURM_NTASKS_PER_NODE
//   Open MPI          OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
// (a local rank and local world size not given default to the rank and the
// world size). The store's address is MASTER_ADDR when set, else under
// Slurm the first host of SLURM_STEP_NODELIST (or SLURM_NODELIST: "node[03-
// 05,9]" gives node03), where rank 0 runs, else SLURM_LAUNCH_NODE_IPADDR;
// under Open MPI on one node (local size = world size) 127.0.0.1. Its port
// is MASTER_PORT, defaulting to 29500 under Slurm and Open MPI. Under Slurm
// and Open MPI rank 0 hosts the store.
// Errors: FailedPrecondition naming what is missing (no launcher's
// variables, MASTER_ADDR under torchrun or a multi-node Open MPI job,
// MASTER_PORT under torchrun); InvalidArgument naming a variable and its
// value that is out of range or malformed.
absl::StatusOr<LaunchEnv> LaunchEnvFrom(const EnvLookup& lookup);

// The first host of a Slurm host list: "a,b" -> a, "n[07-09,12]x" -> n07x,
// "gpu[1-2]-[3-4]" -> gpu1-3. Errors: an empty or unbalanced list
// (InvalidArgument naming it).
absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist);

// LaunchEnvFrom the process's environment; the store's secret comes from
// DTENSOR_STORE_SECRET or DTENSOR_STORE_SECRET_FILE
// (StoreSecretFromEnvironment).
// Errors: LaunchEnvFrom's; FailedPrecondition for a secret file that cannot
// be read.
absl::StatusOr<LaunchEnv> LaunchEnvFromEnvironment();

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_LAUNCH_ENV_H_
