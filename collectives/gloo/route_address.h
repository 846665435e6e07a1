#ifndef DTENSOR_COLLECTIVES_GLOO_ROUTE_ADDRESS_H_
#define DTENSOR_COLLECTIVES_GLOO_ROUTE_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace dtensor {

// A local address of this host and the network interface that holds it.
struct LocalAddress {
  std::string address;  // Numeric: "10.213.0.2", "::1".
  std::string iface;    // "eth0"; empty when no interface lists the address.
  bool loopback = false;
};

// The address a Gloo rank advertises to its peers when neither
// DTENSOR_GLOO_HOSTNAME nor DTENSOR_GLOO_IFACE names one: the local address
// of this host's route to the rendezvous store at `master_addr` (a name or a
// numeric address), which its peers reach too, where the host name may
// resolve to a loopback address that they cannot reach. Found without
// sending anything: a UDP socket connected to `master_addr`:`port` and its
// local name (getsockname).
// Errors: InvalidArgument when `master_addr` does not resolve;
// FailedPrecondition naming DTENSOR_GLOO_IFACE when this host has no route
// to it, or only a loopback address for a master that is not loopback
// (remote peers could not connect).
absl::StatusOr<LocalAddress> RouteAddressToward(const std::string& master_addr,
                                                int port);

// RouteAddressToward's last check: OK unless `local` is a loopback address
// while the master (`master_addr`, which resolved to a loopback address or
// not as `master_loopback` says) is not.
// Errors: FailedPrecondition naming both addresses and DTENSOR_GLOO_IFACE.
absl::Status CheckPeersCanReach(const LocalAddress& local,
                                const std::string& master_addr,
                                bool master_loopback);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_ROUTE_ADDRESS_H_
