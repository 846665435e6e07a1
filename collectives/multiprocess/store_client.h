#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_CLIENT_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"

namespace dtensor {

// One rank's connection to the rendezvous store (store_server.h).
// Thread-safe: requests are serialized on the one connection. Every request
// ends within kRequestTimeout.
// Errors: (every request) Unavailable naming the store's address when it is
// gone; DeadlineExceeded when it does not answer in time; DataLoss for a
// malformed reply; PermissionDenied when the store refuses the connection
// (no or a wrong secret: store_server.h), which it then closes.
class StoreClient {
 public:
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(10);

  // Connects to `host`:`port`, retrying until `timeout` (the store may start
  // after its clients), and says hello as `rank` (-1: an observer whose
  // leaving marks no rank exited) with the job's `secret` (store_secret.h;
  // empty for a store without one).
  // Errors: PermissionDenied (with the store's message) when the store
  // refuses the secret.
  static absl::StatusOr<std::unique_ptr<StoreClient>> Connect(
      const std::string& host, int port, int64_t rank, absl::Duration timeout,
      absl::string_view secret = "");

  // A client that has not said hello (no secret, no rank): what a stranger
  // reaching the store's port has, for tests that it is refused.
  static absl::StatusOr<std::unique_ptr<StoreClient>> ConnectWithoutHello(
      const std::string& host, int port, absl::Duration timeout);

  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;
  ~StoreClient();

  absl::Status Set(absl::string_view key, absl::string_view value);

  // The value of each key, nullopt where the key is absent.
  absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      absl::Span<const std::string> keys);

  // The values of `keys` once all are present, polling until `timeout`.
  // Errors: DeadlineExceeded naming the keys still absent.
  absl::StatusOr<std::vector<std::string>> WaitAndGet(
      absl::Span<const std::string> keys, absl::Duration timeout);

  // The ranks whose connection to the store has closed, ascending.
  absl::StatusOr<std::vector<int64_t>> ExitedRanks();

  // "127.0.0.1:29500".
  const std::string& address() const { return address_; }
  // This end's address of the connection ("10.0.0.7"): the host's address
  // toward the store; empty where the socket cannot tell.
  const std::string& local_address() const { return local_address_; }

 private:
  StoreClient(int fd, std::string address);

  // Sends `request` and returns the reply's fields after its status byte.
  absl::StatusOr<std::string> Call(const std::string& request);

  const std::string address_;
  const std::string local_address_;
  Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_CLIENT_H_
