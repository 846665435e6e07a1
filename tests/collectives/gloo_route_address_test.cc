// The address a Gloo rank advertises by default (route_address.h): the local
// end of the route to the store, checked against this host's interfaces.
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "dtensor/collectives/gloo/route_address.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// A non-loopback IPv4 address of an interface of this host and the
// interface's name, independently of route_address.cc: from getifaddrs.
bool FirstNonLoopbackAddress(std::string* address, std::string* iface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owned(list, ::freeifaddrs);
  for (const ifaddrs* e = list; e != nullptr; e = e->ifa_next) {
    if (e->ifa_addr == nullptr || e->ifa_addr->sa_family != AF_INET) continue;
    char host[NI_MAXHOST];
    if (::getnameinfo(e->ifa_addr, sizeof(sockaddr_in), host, sizeof(host),
                      nullptr, 0, NI_NUMERICHOST) != 0) {
      continue;
    }
    if (std::string(host).rfind("127.", 0) == 0) continue;
    *address = host;
    *iface = e->ifa_name;
    return true;
  }
  return false;
}

TEST(RouteAddressTest, LoopbackMasterGivesLoopback) {
  absl::StatusOr<LocalAddress> local = RouteAddressToward("127.0.0.1", 29500);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->address, "127.0.0.1");
  EXPECT_TRUE(local->loopback);
  EXPECT_EQ(local->iface, "lo");
}

TEST(RouteAddressTest, LocalhostByNameGivesLoopback) {
  absl::StatusOr<LocalAddress> local = RouteAddressToward("localhost", 0);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_TRUE(local->loopback) << local->address;
}

TEST(RouteAddressTest, AnAddressOfThisHostGivesThatAddress) {
  std::string address, iface;
  if (!FirstNonLoopbackAddress(&address, &iface)) {
    GTEST_SKIP() << "skipped: this host has no non-loopback IPv4 address";
  }
  absl::StatusOr<LocalAddress> local = RouteAddressToward(address, 29500);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->address, address);
  EXPECT_EQ(local->iface, iface);
  EXPECT_FALSE(local->loopback);
}

TEST(RouteAddressTest, AnUnresolvableMasterIsInvalid) {
  absl::StatusOr<LocalAddress> local =
      RouteAddressToward("no-such-host.invalid", 29500);
  EXPECT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument)
      << local.status();
}

TEST(RouteAddressTest, LoopbackTowardARemoteMasterNamesTheVariable) {
  LocalAddress loopback{"127.0.0.1", "lo", true};
  const absl::Status status =
      CheckPeersCanReach(loopback, "10.213.0.1", /*master_loopback=*/false);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("DTENSOR_GLOO_IFACE"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("10.213.0.1"), std::string::npos) << status;
  EXPECT_TRUE(CheckPeersCanReach(loopback, "127.0.0.1", true).ok());
  EXPECT_TRUE(
      CheckPeersCanReach({"10.213.0.2", "vethB", false}, "10.213.0.1", false)
          .ok());
}

}  // namespace
}  // namespace dtensor
