#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_SERVER_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_SERVER_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtensor/base/mutex.h"

namespace dtensor {
namespace store {
class FrameReader;
}  // namespace store

// The rendezvous store of a multi-process job: a key-value map served over
// TCP (store_protocol.h) to the ranks' StoreClients, which exchange their
// Gloo addresses and NCCL ids through it and post what they wait for. It
// also tracks which ranks are connected: a rank whose connection closes (it
// exited or crashed) is reported by ExitedRanks, so that its peers can tell
// "gone" from "late". Hosted by the launcher (dtrun) or by rank 0.
//
// The server thread never blocks on a client: requests are answered at once
// (clients poll for keys that are not there yet), a client that sends a
// malformed frame is dropped, and a reply that cannot be sent within a
// second drops its client.
//
// A store with a secret (the job's: store_secret.h) answers a connection
// only after its Hello carries that secret: any other request first, or a
// Hello with another secret, gets an error reply and the connection is
// closed, so a stranger on the network can neither read nor write keys nor
// pose as a rank. Bind it to the job's address (MASTER_ADDR) rather than
// every interface.
class StoreServer {
 public:
  // Serves on `host`:`port` (port 0 picks a free port) until destroyed;
  // `secret` empty: every client is answered.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(
      const std::string& host, int port, std::string secret = "");

  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  // Stops serving and closes every connection.
  ~StoreServer();

  int port() const { return port_; }

  // Blocks until no rank that said hello is connected any more, or until
  // `timeout`; returns whether none is. The host of the store calls it
  // before exiting, so that slower ranks can still reach the store.
  bool WaitUntilRanksLeave(absl::Duration timeout);

 private:
  struct Connection {
    std::string input;     // Bytes received, not yet a whole frame.
    int64_t rank = -1;     // Set by kHello.
    bool greeted = false;  // By a kHello with the secret.
    bool refused = false;  // Close once the reply is sent.
  };

  StoreServer(int listen_fd, int port, int wake_read_fd, int wake_write_fd,
              std::string secret);

  void Serve();
  void Accept();
  // Reads what `fd` has sent and answers its complete requests; false when
  // the connection must close.
  bool Receive(int fd, Connection& connection);
  // The reply to one request, or nullopt for a malformed one.
  std::optional<std::string> Answer(const std::string& request,
                                    Connection& connection);
  // kHello's reply.
  std::optional<std::string> Greet(store::FrameReader& reader,
                                   Connection& connection);
  void Close(int fd);

  const int listen_fd_;
  const int port_;
  const int wake_read_fd_;
  const int wake_write_fd_;
  const std::string secret_;
  // Owned by the server thread.
  std::map<int, Connection> connections_;
  std::map<std::string, std::string> values_;

  Mutex mu_;
  std::map<int64_t, int> connected_ranks_ ABSL_GUARDED_BY(mu_);  // -> count
  std::set<int64_t> exited_ranks_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_SERVER_H_
