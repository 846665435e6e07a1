#ifndef DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_
#define DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_

#include <cstdint>
#include <memory>

#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/multiprocess/rendezvous_session.h"
#include "gloo/transport/device.h"

namespace dtensor {

// What one process's GlooBackend and all its communicators share; each
// communicator keeps it alive, so communicators may outlive their backend.
struct GlooRuntime {
  int64_t rank = 0;
  int64_t world_size = 1;
  CommunicatorOptions options;
  std::unique_ptr<RendezvousSession> session;
  // The TCP transport (one event loop thread) of every context; destroyed
  // before the session.
  std::shared_ptr<gloo::transport::Device> device;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_
