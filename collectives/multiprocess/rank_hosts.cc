#include "dtensor/collectives/multiprocess/rank_hosts.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

std::string HostKey(int64_t rank) {
  return absl::StrCat("dtensor/host/", rank);
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

std::string ThisHostText(const StoreClient& client) {
  const std::string name = HostName();
  const std::string& address = client.local_address();
  if (address.empty()) return name.empty() ? "an unnamed host" : name;
  if (name.empty()) return address;
  return absl::StrCat(name, " at ", address);
}

absl::Status PublishRankHost(StoreClient& client, int64_t rank) {
  return client.Set(HostKey(rank), ThisHostText(client));
}

std::map<int64_t, std::string> ReadRankHosts(StoreClient& client,
                                             absl::Span<const int64_t> ranks) {
  std::vector<std::string> keys;
  for (int64_t rank : ranks) keys.push_back(HostKey(rank));
  std::map<int64_t, std::string> hosts;
  absl::StatusOr<std::vector<std::optional<std::string>>> values =
      client.MultiGet(keys);
  if (!values.ok()) return hosts;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if ((*values)[i].has_value()) hosts[ranks[i]] = *(*values)[i];
  }
  return hosts;
}

std::string HostsOfRanks(absl::Span<const int64_t> ranks,
                         const std::map<int64_t, std::string>& hosts) {
  // Hosts in order of their first rank, each with its ranks.
  std::vector<std::pair<std::string, std::vector<int64_t>>> groups;
  for (int64_t rank : ranks) {
    const auto found = hosts.find(rank);
    const std::string host =
        found == hosts.end() ? "an unknown host" : found->second;
    auto group = groups.begin();
    while (group != groups.end() && group->first != host) ++group;
    if (group == groups.end()) {
      groups.push_back({host, {}});
      group = groups.end() - 1;
    }
    group->second.push_back(rank);
  }
  const bool any_known =
      std::any_of(ranks.begin(), ranks.end(),
                  [&](int64_t r) { return hosts.count(r) > 0; });
  if (!any_known) return "";
  if (groups.size() == 1) {
    return absl::StrCat(" (on host ", groups[0].first, ")");
  }
  std::vector<std::string> parts;
  for (const auto& [host, members] : groups) {
    parts.push_back(
        absl::StrCat(host, " [", absl::StrJoin(members, ", "), "]"));
  }
  return absl::StrCat(" (on hosts ", absl::StrJoin(parts, ", "), ")");
}

}  // namespace dtensor
