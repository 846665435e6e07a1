#ifndef DTENSOR_COLLECTIVES_GLOO_GLOO_STORE_H_
#define DTENSOR_COLLECTIVES_GLOO_GLOO_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "dtensor/collectives/multiprocess/store_client.h"
#include "gloo/rendezvous/store.h"

namespace dtensor {

// Gloo's rendezvous interface over the job's store: the keys Gloo sets and
// waits for (each rank's addresses, during Context::connectFullMesh) live
// under `prefix`. Gloo reports failures by exception, so these methods throw
// gloo::IoException (on a timeout or an unreachable store) instead of
// returning a status; the communicator code turns them back into statuses.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  // `client` must outlive this store; waits without a timeout of their own
  // (get) use `timeout`.
  GlooStore(StoreClient& client, std::string prefix,
            std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;

  StoreClient& client_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_GLOO_STORE_H_
