#include "dtensor/collectives/multiprocess/store_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/collectives/multiprocess/store_protocol.h"
#include "dtensor/collectives/multiprocess/store_secret.h"

namespace dtensor {
namespace {

using store::Command;
using store::FrameReader;
using store::FrameWriter;
using store::Reply;

// How long a reply may take to send before its client is dropped.
constexpr absl::Duration kReplyTimeout = absl::Seconds(1);

std::string OkReply() { return FrameWriter(Reply::kOk).payload(); }

std::string ErrorReply(absl::string_view message) {
  return FrameWriter(Reply::kError).Str(message).payload();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(
    const std::string& host, int port, std::string secret) {
  absl::StatusOr<int> listen_fd = store::ListenSocket(host, port);
  if (!listen_fd.ok()) return listen_fd.status();
  absl::StatusOr<int> bound_port = store::LocalPort(*listen_fd);
  int wake[2];
  if (!bound_port.ok() || ::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(*listen_fd);
    return bound_port.ok() ? absl::InternalError(absl::StrCat(
                                 "store: pipe: ", std::strerror(errno)))
                           : bound_port.status();
  }
  std::unique_ptr<StoreServer> server(new StoreServer(
      *listen_fd, *bound_port, wake[0], wake[1], std::move(secret)));
  server->thread_ = std::thread([raw = server.get()] { raw->Serve(); });
  return server;
}

StoreServer::StoreServer(int listen_fd, int port, int wake_read_fd,
                         int wake_write_fd, std::string secret)
    : listen_fd_(listen_fd),
      port_(port),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      secret_(std::move(secret)) {}

StoreServer::~StoreServer() {
  const char stop = 's';
  while (::write(wake_write_fd_, &stop, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, connection] : connections_) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_read_fd_);
  ::close(wake_write_fd_);
}

bool StoreServer::WaitUntilRanksLeave(absl::Duration timeout) {
  MutexLock lock(&mu_);
  auto none_connected = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return connected_ranks_.empty();
  };
  return mu_.AwaitWithTimeout(none_connected, timeout);
}

void StoreServer::Serve() {
  std::vector<pollfd> polled;
  while (true) {
    polled.clear();
    polled.push_back({wake_read_fd_, POLLIN, 0});
    polled.push_back({listen_fd_, POLLIN, 0});
    for (const auto& [fd, connection] : connections_) {
      polled.push_back({fd, POLLIN, 0});
    }
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;  // Unrecoverable; the clients see their connections fail.
    }
    if (polled[0].revents != 0) return;  // Stopping.
    if (polled[1].revents != 0) Accept();
    for (size_t i = 2; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      const int fd = polled[i].fd;
      if (!Receive(fd, connections_[fd])) Close(fd);
    }
  }
}

void StoreServer::Accept() {
  while (true) {
    const int fd =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: no more pending connections.
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    connections_[fd] = Connection();
  }
}

bool StoreServer::Receive(int fd, Connection& connection) {
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    connection.input.append(buffer, got);
  }
  // Answer every complete frame.
  while (connection.input.size() >= 4) {
    uint32_t size = 0;
    for (int byte = 0; byte < 4; ++byte) {
      size |=
          static_cast<uint32_t>(static_cast<uint8_t>(connection.input[byte]))
          << (8 * byte);
    }
    if (size > store::kMaxFrameBytes) return false;
    if (connection.input.size() < 4 + size) break;
    const std::string request = connection.input.substr(4, size);
    connection.input.erase(0, 4 + size);
    std::optional<std::string> reply = Answer(request, connection);
    if (!reply.has_value()) return false;
    if (!store::SendAll(fd, store::Frame(*reply), absl::Now() + kReplyTimeout)
             .ok() ||
        connection.refused) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> StoreServer::Answer(const std::string& request,
                                               Connection& connection) {
  FrameReader reader(request);
  uint8_t command = 0;
  if (!reader.U8(&command)) return std::nullopt;
  if (static_cast<Command>(command) == Command::kHello) {
    return Greet(reader, connection);
  }
  if (!secret_.empty() && !connection.greeted) {
    connection.refused = true;
    return ErrorReply(
        "this store admits only its job's ranks: say hello with the job's "
        "secret (DTENSOR_STORE_SECRET) first");
  }
  switch (static_cast<Command>(command)) {
    case Command::kHello:
      return std::nullopt;  // Answered above.
    case Command::kSet: {
      std::string key;
      std::string value;
      if (!reader.Str(&key) || !reader.Str(&value)) return std::nullopt;
      values_[std::move(key)] = std::move(value);
      return OkReply();
    }
    case Command::kMultiGet: {
      int64_t count = 0;
      if (!reader.I64(&count) || count < 0) return std::nullopt;
      FrameWriter reply(Reply::kOk);
      for (int64_t i = 0; i < count; ++i) {
        std::string key;
        if (!reader.Str(&key)) return std::nullopt;
        auto found = values_.find(key);
        reply.U8(found != values_.end() ? 1 : 0);
        reply.Str(found != values_.end() ? found->second : "");
      }
      return reply.payload();
    }
    case Command::kExited: {
      FrameWriter reply(Reply::kOk);
      MutexLock lock(&mu_);
      reply.I64(static_cast<int64_t>(exited_ranks_.size()));
      for (int64_t rank : exited_ranks_) reply.I64(rank);
      return reply.payload();
    }
  }
  return std::nullopt;
}

std::optional<std::string> StoreServer::Greet(FrameReader& reader,
                                              Connection& connection) {
  int64_t rank = 0;
  std::string secret;
  if (!reader.I64(&rank) || !reader.Str(&secret) || rank < -1 ||
      connection.greeted) {
    return std::nullopt;
  }
  if (!secret_.empty() && !SecretsMatch(secret, secret_)) {
    connection.refused = true;
    return ErrorReply(
        absl::StrCat("wrong secret for this store (rank ", rank,
                     "): the job's processes share DTENSOR_STORE_SECRET"));
  }
  connection.greeted = true;
  if (rank < 0) return OkReply();  // An observer.
  connection.rank = rank;
  MutexLock lock(&mu_);
  ++connected_ranks_[rank];
  exited_ranks_.erase(rank);
  return OkReply();
}

void StoreServer::Close(int fd) {
  auto found = connections_.find(fd);
  if (found == connections_.end()) return;
  const int64_t rank = found->second.rank;
  connections_.erase(found);
  ::close(fd);
  if (rank < 0) return;
  MutexLock lock(&mu_);
  if (--connected_ranks_[rank] == 0) {
    connected_ranks_.erase(rank);
    exited_ranks_.insert(rank);
  }
}

}  // namespace dtensor
