#include "dtensor/collectives/multiprocess/rendezvous_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/collectives/multiprocess/rank_hosts.h"

namespace dtensor {
namespace {

absl::Status CheckOptions(const MultiprocessOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the world size must be at least 1, got ", options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " is not in a world of ", options.world_size));
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", options.master_port, " is out of range"));
  }
  if (options.master_port == 0 &&
      !(options.host_store && options.world_size == 1)) {
    return absl::InvalidArgumentError(
        "master port 0 (a free port) only works for a world of one that "
        "hosts its store");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousSession>> RendezvousSession::Join(
    const MultiprocessOptions& options) {
  absl::Status valid = CheckOptions(options);
  if (!valid.ok()) return valid;
  std::unique_ptr<RendezvousSession> session(new RendezvousSession());
  session->linger_ = options.linger;
  int port = options.master_port;
  if (options.host_store) {
    absl::StatusOr<std::unique_ptr<StoreServer>> server =
        StoreServer::Start(options.master_addr, port, options.store_secret);
    if (!server.ok()) return server.status();
    session->server_ = *std::move(server);
    port = session->server_->port();
  }
  absl::StatusOr<std::unique_ptr<StoreClient>> client = StoreClient::Connect(
      options.master_addr, port, options.rank,
      options.communicator.DeadlineOrDefault(), options.store_secret);
  if (!client.ok()) return client.status();
  // Before any communicator: its members read the hosts when it is created.
  absl::Status published = PublishRankHost(**client, options.rank);
  if (!published.ok()) return published;
  session->client_ = *std::move(client);
  session->board_ = std::make_unique<ArrivalBoard>(session->client_.get());
  return session;
}

RendezvousSession::~RendezvousSession() {
  board_.reset();
  client_.reset();
  if (server_ != nullptr) server_->WaitUntilRanksLeave(linger_);
}

absl::Status JoinJob(const MultiprocessOptions& options,
                     MultiprocessRuntime& runtime) {
  runtime.rank = options.rank;
  runtime.world_size = options.world_size;
  runtime.options = options.communicator;
  absl::StatusOr<std::unique_ptr<RendezvousSession>> session =
      RendezvousSession::Join(options);
  if (!session.ok()) return session.status();
  runtime.session = *std::move(session);
  return absl::OkStatus();
}

}  // namespace dtensor
