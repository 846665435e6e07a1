#include "collectives/gloo/rendezvous_session.h"

#include <utility>

namespace dtensor {

absl::StatusOr<std::unique_ptr<RendezvousSession>> RendezvousSession::Join(
    const Options& options) {
  std::unique_ptr<RendezvousSession> session(new RendezvousSession());
  session->linger_ = options.linger;
  int port = options.master_port;
  if (options.host_store) {
    absl::StatusOr<std::unique_ptr<StoreServer>> server =
        StoreServer::Start(options.master_addr, port);
    if (!server.ok()) return server.status();
    session->server_ = *std::move(server);
    port = session->server_->port();
  }
  absl::StatusOr<std::unique_ptr<StoreClient>> client = StoreClient::Connect(
      options.master_addr, port, options.rank, options.join_timeout);
  if (!client.ok()) return client.status();
  session->client_ = *std::move(client);
  session->board_ = std::make_unique<ArrivalBoard>(session->client_.get());
  return session;
}

RendezvousSession::~RendezvousSession() {
  board_.reset();
  client_.reset();
  if (server_ != nullptr) server_->WaitUntilRanksLeave(linger_);
}

}  // namespace dtensor
