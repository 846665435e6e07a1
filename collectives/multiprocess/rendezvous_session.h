#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_RENDEZVOUS_SESSION_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_RENDEZVOUS_SESSION_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/multiprocess/arrival_board.h"
#include "dtensor/collectives/multiprocess/multiprocess_options.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_server.h"

namespace dtensor {

// One process's part in a job's rendezvous: the store (hosted here when
// asked), this rank's connection to it, and the arrival board.
class RendezvousSession {
 public:
  // Joins the job `options` describe: hosts the store when asked to, waits
  // for it to come up as long as the communicators' default deadline, and
  // when hosting, waits at the session's end up to options.linger for the
  // other ranks to leave. InvalidArgument for a rank outside the world, a
  // port out of range, or port 0 where other ranks would need to know the
  // port.
  static absl::StatusOr<std::unique_ptr<RendezvousSession>> Join(
      const MultiprocessOptions& options);

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

// What one process's multi-process backend (GlooRuntime, NcclRuntime) and all
// its communicators share; each communicator keeps it alive, so communicators
// may outlive their backend.
struct MultiprocessRuntime {
  int64_t rank = 0;
  int64_t world_size = 1;
  CommunicatorOptions options;
  std::unique_ptr<RendezvousSession> session;
};

// Sets `runtime`'s place in the job and its communicators' options from
// `options`, and joins the rendezvous (RendezvousSession::Join).
absl::Status JoinJob(const MultiprocessOptions& options,
                     MultiprocessRuntime& runtime);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_RENDEZVOUS_SESSION_H_
