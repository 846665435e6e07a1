// Errors about lost peers name their hosts (rank_hosts.h): each rank
// publishes its host in the store, and the text groups ranks by host.
#include "dtensor/collectives/multiprocess/rank_hosts.h"

#include <memory>

#include "absl/strings/match.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_server.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(HostsOfRanksTest, OneHostGroupsAndUnknown) {
  const std::map<int64_t, std::string> hosts = {
      {0, "a at 10.0.0.1"}, {1, "a at 10.0.0.1"}, {2, "b at 10.0.0.2"}};
  EXPECT_EQ(HostsOfRanks({2}, hosts), " (on host b at 10.0.0.2)");
  EXPECT_EQ(HostsOfRanks({0, 1}, hosts), " (on host a at 10.0.0.1)");
  EXPECT_EQ(HostsOfRanks({0, 2, 1}, hosts),
            " (on hosts a at 10.0.0.1 [0, 1], b at 10.0.0.2 [2])");
  EXPECT_EQ(HostsOfRanks({2, 3}, hosts),
            " (on hosts b at 10.0.0.2 [2], an unknown host [3])");
  EXPECT_EQ(HostsOfRanks({3}, hosts), "");
  EXPECT_EQ(HostsOfRanks({3}, {}), "");
}

TEST(RankHostsTest, PublishedHostsAreRead) {
  int port = 0;
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", port, "secret");
  ASSERT_TRUE(server.ok()) << server.status();
  port = (*server)->port();
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::Connect("127.0.0.1", port, 1, absl::Seconds(10), "secret");
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->local_address(), "127.0.0.1");
  const std::string host = ThisHostText(**client);
  EXPECT_TRUE(absl::StrContains(host, "127.0.0.1")) << host;
  ASSERT_TRUE(PublishRankHost(**client, 1).ok());
  const std::map<int64_t, std::string> hosts = ReadRankHosts(**client, {0, 1});
  ASSERT_EQ(hosts.size(), 1u);  // Rank 0 did not publish.
  EXPECT_EQ(hosts.at(1), host);
}

}  // namespace
}  // namespace dtensor
