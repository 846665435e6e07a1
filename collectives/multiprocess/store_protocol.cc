#include "dtensor/collectives/multiprocess/store_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"

namespace dtensor::store {
namespace {

std::string Address(const std::string& host, int port) {
  return absl::StrCat(host, ":", port);
}

// Milliseconds until `deadline` for poll(2), at least 0.
int PollTimeout(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Waits until `fd` has `events` or `deadline` passes.
absl::Status AwaitReady(int fd, short events, absl::Time deadline,
                        absl::string_view what) {
  while (true) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, PollTimeout(deadline));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      return absl::UnavailableError(absl::StrCat(
          "store: poll failed while ", what, ": ", std::strerror(errno)));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("store: timed out while ", what));
  }
}

void SetNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

// Sends small frames at once (no Nagle delay); 0, for FirstUsableSocket.
int SetNoDelay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  return 0;
}

using AddrInfoPtr = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port,
                                    bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = absl::StrCat(port);
  const int error =
      ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (error != 0) {
    return absl::InvalidArgumentError(absl::StrCat("store: cannot resolve ",
                                                   Address(host, port), ": ",
                                                   ::gai_strerror(error)));
  }
  return AddrInfoPtr(result, ::freeaddrinfo);
}

}  // namespace

FrameWriter& FrameWriter::U8(uint8_t value) {
  payload_.push_back(static_cast<char>(value));
  return *this;
}

FrameWriter& FrameWriter::I64(int64_t value) {
  for (int byte = 0; byte < 8; ++byte) {
    payload_.push_back(
        static_cast<char>((static_cast<uint64_t>(value) >> (8 * byte)) & 0xff));
  }
  return *this;
}

FrameWriter& FrameWriter::Str(absl::string_view value) {
  I64(static_cast<int64_t>(value.size()));
  payload_.append(value.data(), value.size());
  return *this;
}

bool FrameReader::U8(uint8_t* value) {
  if (rest_.empty()) return false;
  *value = static_cast<uint8_t>(rest_[0]);
  rest_.remove_prefix(1);
  return true;
}

bool FrameReader::I64(int64_t* value) {
  if (rest_.size() < 8) return false;
  uint64_t bits = 0;
  for (int byte = 0; byte < 8; ++byte) {
    bits |= static_cast<uint64_t>(static_cast<uint8_t>(rest_[byte]))
            << (8 * byte);
  }
  *value = static_cast<int64_t>(bits);
  rest_.remove_prefix(8);
  return true;
}

bool FrameReader::Str(std::string* value) {
  int64_t size = 0;
  if (!I64(&size) || size < 0 || static_cast<uint64_t>(size) > rest_.size()) {
    return false;
  }
  value->assign(rest_.data(), size);
  rest_.remove_prefix(size);
  return true;
}

std::string Frame(absl::string_view payload) {
  std::string frame(4, '\0');
  const uint32_t size = static_cast<uint32_t>(payload.size());
  for (int byte = 0; byte < 4; ++byte) {
    frame[byte] = static_cast<char>((size >> (8 * byte)) & 0xff);
  }
  frame.append(payload.data(), payload.size());
  return frame;
}

namespace {

// Moves `size` bytes over non-blocking socket `fd` by calls of `io(done)` (a
// ::send or ::recv of the bytes from offset `done` on, returning what they
// return), waiting until `deadline` for `events` whenever the socket would
// block. `what` ("sending", "receiving") names the direction in errors.
absl::Status TransferAll(int fd, size_t size, short events, absl::Time deadline,
                         absl::string_view what,
                         absl::FunctionRef<ssize_t(size_t done)> io) {
  size_t done = 0;
  while (done < size) {
    const ssize_t moved = io(done);
    if (moved > 0) {
      done += moved;
      continue;
    }
    if (moved == 0) {
      return absl::UnavailableError("store: connection closed by the peer");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::Status ready = AwaitReady(fd, events, deadline, what);
      if (!ready.ok()) return ready;
      continue;
    }
    return absl::UnavailableError(absl::StrCat(
        "store: connection lost while ", what, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Receives exactly `size` bytes into `out`.
absl::Status ReceiveExactly(int fd, char* out, size_t size,
                            absl::Time deadline) {
  return TransferAll(fd, size, POLLIN, deadline, "receiving", [&](size_t done) {
    return ::recv(fd, out + done, size - done, MSG_DONTWAIT);
  });
}

}  // namespace

absl::Status SendAll(int fd, absl::string_view bytes, absl::Time deadline) {
  return TransferAll(
      fd, bytes.size(), POLLOUT, deadline, "sending", [&](size_t done) {
        return ::send(fd, bytes.data() + done, bytes.size() - done,
                      MSG_NOSIGNAL | MSG_DONTWAIT);
      });
}

absl::StatusOr<std::string> ReceiveFrame(int fd, absl::Time deadline) {
  char prefix[4];
  absl::Status status = ReceiveExactly(fd, prefix, 4, deadline);
  if (!status.ok()) return status;
  uint32_t size = 0;
  for (int byte = 0; byte < 4; ++byte) {
    size |= static_cast<uint32_t>(static_cast<uint8_t>(prefix[byte]))
            << (8 * byte);
  }
  if (size > kMaxFrameBytes) {
    return absl::DataLossError(
        absl::StrCat("store: frame of ", size, " bytes is too large"));
  }
  std::string payload(size, '\0');
  status = ReceiveExactly(fd, payload.data(), size, deadline);
  if (!status.ok()) return status;
  return payload;
}

namespace {

// Tries the addresses of `host`:`port` in order: makes a socket for each
// and hands it to `use`, which returns 0 when the socket is ready (it is then
// the result) or the errno of why not (the socket is closed and the next
// address tried). `passive`: addresses to listen on. Errors: "store: cannot
// <action> <host:port>: <the last address's error>".
absl::StatusOr<int> FirstUsableSocket(
    const std::string& host, int port, bool passive, absl::string_view action,
    absl::FunctionRef<int(int fd, const addrinfo& info)> use) {
  absl::StatusOr<AddrInfoPtr> addresses = Resolve(host, port, passive);
  if (!addresses.ok()) return addresses.status();
  std::string last_error = "no address";
  for (addrinfo* info = addresses->get(); info != nullptr;
       info = info->ai_next) {
    const int fd = ::socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC,
                            info->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int error = use(fd, *info);
    if (error == 0) return fd;
    last_error = std::strerror(error);
    ::close(fd);
  }
  return absl::UnavailableError(absl::StrCat(
      "store: cannot ", action, " ", Address(host, port), ": ", last_error));
}

}  // namespace

absl::StatusOr<int> ListenSocket(const std::string& host, int port) {
  return FirstUsableSocket(
      host, port, /*passive=*/true, "listen on",
      [](int fd, const addrinfo& info) {
        const int on = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        if (::bind(fd, info.ai_addr, info.ai_addrlen) != 0 ||
            ::listen(fd, 128) != 0) {
          return errno;
        }
        SetNonBlocking(fd);
        return 0;
      });
}

absl::StatusOr<int> ConnectSocket(const std::string& host, int port,
                                  absl::Time deadline) {
  return FirstUsableSocket(
      host, port, /*passive=*/false, "connect to",
      [deadline](int fd, const addrinfo& info) {
        SetNonBlocking(fd);
        if (::connect(fd, info.ai_addr, info.ai_addrlen) == 0) {
          return SetNoDelay(fd);
        }
        int error = errno;
        if (error != EINPROGRESS) return error;
        if (!AwaitReady(fd, POLLOUT, deadline, "connecting").ok()) {
          return ETIMEDOUT;
        }
        socklen_t length = sizeof(error);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        return error == 0 ? SetNoDelay(fd) : error;
      });
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(
        absl::StrCat("store: getsockname: ", std::strerror(errno)));
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

}  // namespace dtensor::store
