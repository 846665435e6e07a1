#include "dtensor/collectives/gloo/route_address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dtensor {
namespace {

// The names tell the user what to set when the default fails.
constexpr char kIfaceHint[] =
    "set DTENSOR_GLOO_IFACE to the interface its peers reach (or "
    "DTENSOR_GLOO_HOSTNAME to its address)";

bool IsLoopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) &&
           v6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

// The numeric form of `address` ("10.0.0.2", "fe80::1"); empty on failure.
std::string Numeric(const sockaddr* address, socklen_t size) {
  char host[NI_MAXHOST];
  if (::getnameinfo(address, size, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    return "";
  }
  return host;
}

// The interface that holds the numeric `address`; empty when none does.
std::string InterfaceOf(const std::string& address) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owned(list, ::freeifaddrs);
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    const sockaddr* a = entry->ifa_addr;
    if (a == nullptr || (a->sa_family != AF_INET && a->sa_family != AF_INET6)) {
      continue;
    }
    const socklen_t size =
        a->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (Numeric(a, size) == address) return entry->ifa_name;
  }
  return "";
}

}  // namespace

absl::Status CheckPeersCanReach(const LocalAddress& local,
                                const std::string& master_addr,
                                bool master_loopback) {
  if (!local.loopback || master_loopback) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "Gloo: the only local address toward MASTER_ADDR ", master_addr, " is ",
      local.address, " (loopback), which remote peers cannot reach; ",
      kIfaceHint));
}

absl::StatusOr<LocalAddress> RouteAddressToward(const std::string& master_addr,
                                                int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* resolved = nullptr;
  const std::string service = absl::StrCat(port);
  const int error =
      ::getaddrinfo(master_addr.c_str(), service.c_str(), &hints, &resolved);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gloo: cannot resolve MASTER_ADDR ", master_addr, ": ",
                     ::gai_strerror(error)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(resolved,
                                                       ::freeaddrinfo);
  std::string why = "no address";
  for (const addrinfo* a = resolved; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // connect() on a UDP socket only picks the route and the source
    // address; nothing is sent.
    sockaddr_storage local{};
    socklen_t size = sizeof(local);
    const bool found =
        ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0;
    if (!found) why = std::strerror(errno);
    ::close(fd);
    if (!found) continue;
    LocalAddress result;
    result.address = Numeric(reinterpret_cast<sockaddr*>(&local), size);
    result.iface = InterfaceOf(result.address);
    result.loopback = IsLoopback(reinterpret_cast<sockaddr*>(&local));
    if (result.address.empty()) continue;
    const absl::Status reachable =
        CheckPeersCanReach(result, master_addr, IsLoopback(a->ai_addr));
    if (!reachable.ok()) return reachable;
    return result;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("Gloo: no route from this host to MASTER_ADDR ", master_addr,
                   " (", why, "); ", kIfaceHint));
}

}  // namespace dtensor
