#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_RENDEZVOUS_SESSION_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_RENDEZVOUS_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtensor/collectives/multiprocess/arrival_board.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_server.h"

namespace dtensor {

// One process's part in a job's rendezvous: the store (hosted here when
// asked), this rank's connection to it, and the arrival board.
class RendezvousSession {
 public:
  struct Options {
    int64_t rank = 0;
    int64_t world_size = 1;
    std::string master_addr = "127.0.0.1";
    int master_port = 0;
    // Host the store at master_addr:master_port (port 0: a free port).
    bool host_store = false;
    // How long to wait for the store to come up.
    absl::Duration join_timeout = absl::Minutes(5);
    // When hosting, how long the session waits at its end for the other
    // ranks to leave the store.
    absl::Duration linger = absl::Seconds(30);
  };

  // The session of a backend's options (GlooBackendOptions,
  // NcclBackendOptions): they name the job alike (rank, world_size,
  // master_addr, master_port, host_store, linger); the store is waited for
  // as long as their communicators' default deadline.
  template <typename BackendOptions>
  static Options OptionsFor(const BackendOptions& backend) {
    Options options;
    options.rank = backend.rank;
    options.world_size = backend.world_size;
    options.master_addr = backend.master_addr;
    options.master_port = backend.master_port;
    options.host_store = backend.host_store;
    options.join_timeout = backend.communicator.DeadlineOrDefault();
    options.linger = backend.linger;
    return options;
  }

  // InvalidArgument for a rank outside the world, a port out of range, or
  // port 0 where other ranks would need to know the port.
  static absl::StatusOr<std::unique_ptr<RendezvousSession>> Join(
      const Options& options);

  RendezvousSession(const RendezvousSession&) = delete;
  RendezvousSession& operator=(const RendezvousSession&) = delete;
  // Stops the board, leaves the store, and when hosting it waits (up to the
  // linger time) for the other ranks to leave too.
  ~RendezvousSession();

  StoreClient& client() { return *client_; }
  ArrivalBoard& board() { return *board_; }

 private:
  RendezvousSession() = default;

  absl::Duration linger_;
  // Declared in the order they are built; destroyed in reverse.
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreClient> client_;
  std::unique_ptr<ArrivalBoard> board_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_RENDEZVOUS_SESSION_H_
