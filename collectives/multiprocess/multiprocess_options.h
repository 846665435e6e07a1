#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_MULTIPROCESS_OPTIONS_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_MULTIPROCESS_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/multiprocess/launch_env.h"

namespace dtensor {

// What the options of every multi-process backend (GlooBackendOptions,
// NcclBackendOptions) hold: this process's place in the job, where the ranks
// meet, and the options of its communicators.
struct MultiprocessOptions {
  int64_t rank = 0;
  int64_t world_size = 1;
  // The rendezvous store (store_server.h), through which the ranks meet.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // The job's secret that the store asks of its clients (store_secret.h);
  // empty: a store open to every client.
  std::string store_secret;
  // Whether this process hosts the store at master_addr:master_port (rank 0
  // does unless a launcher hosts it). Port 0 picks a free port, which only a
  // world of one can use.
  bool host_store = false;
  // Options of every communicator. Their default deadline also bounds how
  // long creating the backend waits for the store, and a communicator for
  // its members.
  CommunicatorOptions communicator;
  // How long a process that hosts the store waits, when it shuts down, for
  // the other ranks to leave it.
  absl::Duration linger = absl::Seconds(30);
};

// Sets the job of `options` from the launcher's environment `env`: rank,
// world size, the store's address and secret, and whether this process hosts
// the store (rank 0, unless the launcher does); and its communicators' options.
inline void SetJobFromLaunchEnv(const LaunchEnv& env,
                                CommunicatorOptions communicator,
                                MultiprocessOptions& options) {
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.master_addr = env.master_addr;
  options.master_port = env.master_port;
  options.host_store = !env.agent_store && env.rank == 0;
  options.store_secret = env.store_secret;
  options.communicator = std::move(communicator);
}

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_MULTIPROCESS_OPTIONS_H_
