#include "dtensor/collectives/multiprocess/store_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/collectives/multiprocess/store_protocol.h"

namespace dtensor {
namespace {

using store::Command;
using store::FrameReader;
using store::FrameWriter;
using store::Reply;

// Polling intervals of WaitAndGet and of connection attempts: short at
// first, so that a rendezvous among ranks that start together is quick.
constexpr absl::Duration kFirstPoll = absl::Milliseconds(1);
constexpr absl::Duration kLongestPoll = absl::Milliseconds(20);

absl::Status Malformed(const std::string& address) {
  return absl::DataLossError(
      absl::StrCat("store ", address, ": malformed reply"));
}

// The numeric local address of socket `fd`; empty where it has none.
std::string LocalAddressOf(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* address = nullptr;
  if (storage.ss_family == AF_INET) {
    address = &reinterpret_cast<sockaddr_in*>(&storage)->sin_addr;
  } else if (storage.ss_family == AF_INET6) {
    address = &reinterpret_cast<sockaddr_in6*>(&storage)->sin6_addr;
  } else {
    return "";
  }
  if (::inet_ntop(storage.ss_family, address, text, sizeof(text)) == nullptr) {
    return "";
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StoreClient>> StoreClient::Connect(
    const std::string& host, int port, int64_t rank, absl::Duration timeout,
    absl::string_view secret) {
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      ConnectWithoutHello(host, port, timeout);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::string> reply =
      (*client)->Call(FrameWriter(Command::kHello)
                          .I64(std::max<int64_t>(rank, -1))
                          .Str(secret)
                          .payload());
  if (!reply.ok()) return reply.status();
  return client;
}

absl::StatusOr<std::unique_ptr<StoreClient>> StoreClient::ConnectWithoutHello(
    const std::string& host, int port, absl::Duration timeout) {
  const std::string address = absl::StrCat(host, ":", port);
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = kFirstPoll;
  absl::Status last = absl::OkStatus();
  while (true) {
    absl::StatusOr<int> fd = store::ConnectSocket(host, port, deadline);
    if (fd.ok()) {
      return std::unique_ptr<StoreClient>(new StoreClient(*fd, address));
    }
    last = fd.status();
    // A host name that does not resolve will not start resolving.
    if (last.code() == absl::StatusCode::kInvalidArgument) return last;
    if (absl::Now() + pause >= deadline) break;
    absl::SleepFor(pause);
    pause = std::min(2 * pause, kLongestPoll * 5);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no store reachable at ", address, " within ",
                   absl::FormatDuration(timeout), " (", last.message(), ")"));
}

StoreClient::StoreClient(int fd, std::string address)
    : address_(std::move(address)),
      local_address_(LocalAddressOf(fd)),
      fd_(fd) {}

StoreClient::~StoreClient() {
  MutexLock lock(&mu_);
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::string> StoreClient::Call(const std::string& request) {
  MutexLock lock(&mu_);
  if (fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("the store at ", address_, " is unreachable"));
  }
  const absl::Time deadline = absl::Now() + kRequestTimeout;
  absl::Status sent = store::SendAll(fd_, store::Frame(request), deadline);
  absl::StatusOr<std::string> reply = sent.ok()
                                          ? store::ReceiveFrame(fd_, deadline)
                                          : absl::StatusOr<std::string>(sent);
  if (!reply.ok()) {
    // The connection is out of step now: later calls fail at once.
    ::close(fd_);
    fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("the store at ", address_,
                     " is unreachable: ", reply.status().message()));
  }
  if (reply->empty()) return Malformed(address_);
  if (static_cast<uint8_t>((*reply)[0]) ==
      static_cast<uint8_t>(Reply::kError)) {
    // The store closes the connection after an error.
    ::close(fd_);
    fd_ = -1;
    FrameReader reader(absl::string_view(*reply).substr(1));
    std::string message;
    if (!reader.Str(&message)) return Malformed(address_);
    return absl::PermissionDeniedError(
        absl::StrCat("the store at ", address_, " refused: ", message));
  }
  if (static_cast<uint8_t>((*reply)[0]) != static_cast<uint8_t>(Reply::kOk)) {
    return Malformed(address_);
  }
  return reply->substr(1);
}

absl::Status StoreClient::Set(absl::string_view key, absl::string_view value) {
  return Call(FrameWriter(Command::kSet).Str(key).Str(value).payload())
      .status();
}

absl::StatusOr<std::vector<std::optional<std::string>>> StoreClient::MultiGet(
    absl::Span<const std::string> keys) {
  FrameWriter request(Command::kMultiGet);
  request.I64(static_cast<int64_t>(keys.size()));
  for (const std::string& key : keys) request.Str(key);
  absl::StatusOr<std::string> reply = Call(request.payload());
  if (!reply.ok()) return reply.status();
  FrameReader reader(*reply);
  std::vector<std::optional<std::string>> values;
  for (size_t i = 0; i < keys.size(); ++i) {
    uint8_t present = 0;
    std::string value;
    if (!reader.U8(&present) || !reader.Str(&value)) return Malformed(address_);
    values.push_back(present ? std::optional<std::string>(std::move(value))
                             : std::nullopt);
  }
  return values;
}

absl::StatusOr<std::vector<std::string>> StoreClient::WaitAndGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = kFirstPoll;
  while (true) {
    absl::StatusOr<std::vector<std::optional<std::string>>> values =
        MultiGet(keys);
    if (!values.ok()) return values.status();
    std::vector<std::string> absent;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!(*values)[i].has_value()) absent.push_back(keys[i]);
    }
    if (absent.empty()) {
      std::vector<std::string> present;
      for (auto& value : *values) present.push_back(*std::move(value));
      return present;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "store ", address_, ": keys [", absl::StrJoin(absent, ", "),
          "] not set within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(pause, deadline - absl::Now()));
    pause = std::min(2 * pause, kLongestPoll);
  }
}

absl::StatusOr<std::vector<int64_t>> StoreClient::ExitedRanks() {
  absl::StatusOr<std::string> reply =
      Call(FrameWriter(Command::kExited).payload());
  if (!reply.ok()) return reply.status();
  FrameReader reader(*reply);
  int64_t count = 0;
  if (!reader.I64(&count) || count < 0) return Malformed(address_);
  std::vector<int64_t> ranks(count);
  for (int64_t& rank : ranks) {
    if (!reader.I64(&rank)) return Malformed(address_);
  }
  return ranks;
}

}  // namespace dtensor
