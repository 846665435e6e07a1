#ifndef DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_
#define DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "collectives/collective_options.h"
#include "collectives/gloo/arrival_board.h"
#include "collectives/gloo/store_client.h"
#include "collectives/gloo/store_server.h"
#include "gloo/transport/device.h"

namespace dtensor {

// What one process's GlooBackend and all its communicators share; each
// communicator keeps it alive, so communicators may outlive their backend.
struct GlooRuntime {
  GlooRuntime() = default;
  GlooRuntime(const GlooRuntime&) = delete;
  GlooRuntime& operator=(const GlooRuntime&) = delete;
  // Stops the board, leaves the store, and when hosting it waits (up to
  // `linger`) for the other ranks to leave it too.
  ~GlooRuntime();

  int64_t rank = 0;
  int64_t world_size = 1;
  CommunicatorOptions options;
  absl::Duration linger;
  // Declared in the order they are built; destroyed in reverse.
  std::unique_ptr<StoreServer> server;  // When this rank hosts the store.
  std::unique_ptr<StoreClient> client;
  std::unique_ptr<ArrivalBoard> board;
  // The TCP transport (one event loop thread) of every context.
  std::shared_ptr<gloo::transport::Device> device;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_
