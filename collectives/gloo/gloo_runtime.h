#ifndef DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_
#define DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_

#include <memory>

#include "dtensor/collectives/multiprocess/rendezvous_session.h"
#include "gloo/transport/device.h"

namespace dtensor {

// What one process's GlooBackend and all its communicators share.
struct GlooRuntime : MultiprocessRuntime {
  // The TCP transport (one event loop thread) of every context; destroyed
  // before the session (a member of the base).
  std::shared_ptr<gloo::transport::Device> device;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_GLOO_RUNTIME_H_
