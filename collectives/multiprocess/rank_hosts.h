#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_RANK_HOSTS_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_RANK_HOSTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/collectives/multiprocess/store_client.h"

namespace dtensor {

// Which host each rank of a multi-process job runs on, so that an error about
// a lost peer names the machine to look at as well as the rank: every rank
// publishes its host in the store when it joins, and each communicator reads
// its members' hosts when it is created (when the store is still reachable:
// a host whose link went down can no longer ask it).

// The host a rank publishes: "<host name> at <address>", the address being
// its end of the connection to the store (its address toward MASTER_ADDR);
// the host name alone where the address is unknown.
std::string ThisHostText(const StoreClient& client);

// Publishes ThisHostText under rank `rank`'s key.
// Errors: those of StoreClient::Set.
absl::Status PublishRankHost(StoreClient& client, int64_t rank);

// The published hosts of `ranks`: those not (yet) published or not readable
// are left out.
std::map<int64_t, std::string> ReadRankHosts(StoreClient& client,
                                             absl::Span<const int64_t> ranks);

// Where `ranks` run, to follow an error that names them: " (on host b at
// 10.0.0.2)"; " (on hosts a at 10.0.0.1 [0], b at 10.0.0.2 [3])" across
// hosts, with "an unknown host" for a rank that published none; "" where no
// rank's host is known.
std::string HostsOfRanks(absl::Span<const int64_t> ranks,
                         const std::map<int64_t, std::string>& hosts);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_RANK_HOSTS_H_
