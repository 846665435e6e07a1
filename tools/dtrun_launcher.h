#ifndef DTENSOR_TOOLS_DTRUN_LAUNCHER_H_
#define DTENSOR_TOOLS_DTRUN_LAUNCHER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dtensor {

// What dtrun starts on one node: `nproc` processes of `command`, ranks
// node_rank * nproc to node_rank * nproc + nproc - 1 of a job of nnodes *
// nproc ranks.
struct LaunchOptions {
  int64_t nproc = 1;
  int64_t nnodes = 1;
  int64_t node_rank = 0;
  // Where the rendezvous store listens. Node 0 hosts it; port 0 picks a
  // free port (one node only: the other nodes could not know it).
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // Whether the launcher of node 0 hosts the store (telling the processes
  // with DTENSOR_AGENT_STORE=1). Otherwise rank 0 hosts it, and the port
  // must be given.
  bool host_store = true;
  // The job's secret that the rendezvous store asks of its clients
  // (dtensor/collectives/multiprocess/store_secret.h), given to the
  // processes in DTENSOR_STORE_SECRET. Empty: DTENSOR_STORE_SECRET or
  // DTENSOR_STORE_SECRET_FILE of this process's environment, else a new
  // random one (one node only: the nodes of a job must share it).
  std::string store_secret;
  // The program and its arguments.
  std::vector<std::string> command;
  // When a process fails, terminate the others: SIGTERM, then SIGKILL after
  // `kill_grace`.
  bool terminate_on_failure = true;
  absl::Duration kill_grace = absl::Seconds(3);
  // Terminate every process after this long; nullopt: never.
  std::optional<absl::Duration> timeout;
  // More environment for the processes.
  std::vector<std::pair<std::string, std::string>> extra_env;
  // Terminate the processes when this process gets SIGINT, SIGTERM or
  // SIGHUP (dtrun itself; not for a library caller with handlers of its
  // own).
  bool forward_signals = false;
};

// How the processes of one node ended.
struct LaunchResult {
  // Per local process: its exit code, or 128 + the signal that ended it.
  std::vector<int> exit_codes;
  // The local index of the first process that failed on its own (not
  // terminated by the launcher); nullopt when none did.
  std::optional<int64_t> first_failure;
  // Whether the launcher terminated the processes: after a failure, a
  // timeout or a signal.
  bool timed_out = false;
  bool interrupted = false;

  // The job's exit code: 0 when every process succeeded; else the first
  // failure's code, 124 after a timeout, 130 after a signal.
  int ExitCode() const;
};

// InvalidArgument naming the first bad option; OK otherwise.
absl::Status CheckLaunchOptions(const LaunchOptions& options);

// Starts the processes with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, DTENSOR_STORE_SECRET and DTENSOR_AGENT_STORE=1
// set (node 0 hosts the
// rendezvous store in this process for the whole job, unless
// `host_store` is false), each in a process group of its own. Forwards their
// output line by line to `out_fd` and `err_fd`, each line prefixed "[rank N] ",
// and returns once all have ended and their output is drained. Errors: bad
// options (InvalidArgument), a program that cannot be started (InvalidArgument
// naming it, after ending the processes already started), a store that cannot
// be hosted, a job of several nodes without a shared secret
// (FailedPrecondition naming DTENSOR_STORE_SECRET and
// DTENSOR_STORE_SECRET_FILE) or a secret file that cannot be read.
absl::StatusOr<LaunchResult> Launch(const LaunchOptions& options, int out_fd,
                                    int err_fd);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_DTRUN_LAUNCHER_H_
