// The pieces the multi-process backends share: the rendezvous store (server
// and client, in one process here), the arrival board, the debug-mode call
// records and the launcher's environment.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "dtensor/collectives/multiprocess/arrival_board.h"
#include "dtensor/collectives/multiprocess/call_records.h"
#include "dtensor/collectives/multiprocess/launch_env.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_protocol.h"
#include "dtensor/collectives/multiprocess/store_server.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

bool Contains(const absl::Status& status, absl::string_view text) {
  return absl::StrContains(status.message(), text);
}

std::unique_ptr<StoreServer> StartServer() {
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  return *std::move(server);
}

std::unique_ptr<StoreClient> Connect(const StoreServer& server, int64_t rank) {
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::Connect("127.0.0.1", server.port(), rank, absl::Seconds(5));
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

// Polls `condition` for up to two seconds.
template <typename Condition>
bool Eventually(Condition condition) {
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (!condition()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST(StoreTest, ValuesSetByOneClientAreSeenByAnother) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> a = Connect(*server, 0);
  std::unique_ptr<StoreClient> b = Connect(*server, 1);
  const std::string binary("\0\x01\xff\n", 4);
  ASSERT_TRUE(a->Set("key", binary).ok());
  ASSERT_TRUE(a->Set("empty", "").ok());
  absl::StatusOr<std::vector<std::optional<std::string>>> values =
      b->MultiGet({"key", "absent", "empty"});
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 3u);
  EXPECT_EQ((*values)[0], binary);
  EXPECT_EQ((*values)[1], std::nullopt);
  EXPECT_EQ((*values)[2], "");
  ASSERT_TRUE(b->Set("key", "overwritten").ok());
  EXPECT_EQ(a->MultiGet({"key"}).value()[0], "overwritten");
}

TEST(StoreTest, WaitAndGetWaitsForKeysSetLater) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> waiter = Connect(*server, 0);
  std::unique_ptr<StoreClient> setter = Connect(*server, 1);
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(setter->Set("b", "2").ok());
    ASSERT_TRUE(setter->Set("a", "1").ok());
  });
  absl::StatusOr<std::vector<std::string>> values =
      waiter->WaitAndGet({"a", "b"}, absl::Seconds(5));
  later.join();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"1", "2"}));
}

TEST(StoreTest, WaitAndGetNamesTheKeysThatNeverCame) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> client = Connect(*server, 0);
  ASSERT_TRUE(client->Set("here", "x").ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> values =
      client->WaitAndGet({"here", "gone", "lost"}, absl::Milliseconds(100));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(values.status(), "keys [gone, lost] not set within"))
      << values.status();
}

TEST(StoreTest, ClosedConnectionsMarkTheirRanksExited) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> observer = Connect(*server, -1);
  std::unique_ptr<StoreClient> two = Connect(*server, 2);
  std::unique_ptr<StoreClient> five = Connect(*server, 5);
  EXPECT_TRUE(observer->ExitedRanks().value().empty());
  five.reset();
  two.reset();
  EXPECT_TRUE(Eventually([&] {
    return observer->ExitedRanks().value() == std::vector<int64_t>{2, 5};
  }));
  // An observer leaving marks nothing; every rank has left now.
  std::unique_ptr<StoreClient> other_observer = Connect(*server, -1);
  other_observer.reset();
  EXPECT_TRUE(server->WaitUntilRanksLeave(absl::Seconds(1)));
  EXPECT_EQ(observer->ExitedRanks().value(), (std::vector<int64_t>{2, 5}));
}

TEST(StoreTest, WaitUntilRanksLeaveTimesOutWhileARankStays) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> staying = Connect(*server, 0);
  EXPECT_FALSE(server->WaitUntilRanksLeave(absl::Milliseconds(50)));
}

TEST(StoreTest, ConnectGivesUpWhenNoStoreComes) {
  // A port that nothing listens on: bind one, then close it.
  std::unique_ptr<StoreServer> server = StartServer();
  const int port = server->port();
  server.reset();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::Connect("127.0.0.1", port, 0, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(client.status(), "no store reachable at 127.0.0.1:"))
      << client.status();
}

TEST(StoreTest, ConnectWaitsForAStoreThatStartsLater) {
  std::unique_ptr<StoreServer> probe = StartServer();
  const int port = probe->port();
  probe.reset();
  std::unique_ptr<StoreServer> server;
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(100));
    absl::StatusOr<std::unique_ptr<StoreServer>> started =
        StoreServer::Start("127.0.0.1", port);
    ASSERT_TRUE(started.ok()) << started.status();
    server = *std::move(started);
  });
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::Connect("127.0.0.1", port, 0, absl::Seconds(5));
  later.join();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Set("k", "v").ok());
}

TEST(StoreTest, UnresolvableHostFailsAtOnce) {
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::Connect("no-such-host.invalid", 1234, 0, absl::Seconds(30));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(client.status(), "no-such-host.invalid:1234"))
      << client.status();
}

TEST(StoreTest, MalformedClientIsDroppedAndOthersAreStillServed) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> good = Connect(*server, 0);
  absl::StatusOr<int> raw = store::ConnectSocket(
      "127.0.0.1", server->port(), absl::Now() + absl::Seconds(2));
  ASSERT_TRUE(raw.ok()) << raw.status();
  // An unknown command, then a frame claiming 1 GiB.
  ASSERT_TRUE(store::SendAll(*raw, store::Frame("\x63garbage"),
                             absl::Now() + absl::Seconds(1))
                  .ok());
  ASSERT_TRUE(store::SendAll(*raw, std::string("\xff\xff\xff\x3f", 4),
                             absl::Now() + absl::Seconds(1))
                  .ok());
  EXPECT_FALSE(store::ReceiveFrame(*raw, absl::Now() + absl::Seconds(2)).ok());
  ::close(*raw);
  EXPECT_TRUE(good->Set("still", "served").ok());
  EXPECT_EQ(good->MultiGet({"still"}).value()[0], "served");
}

TEST(StoreTest, RequestsFailOnceTheServerIsGone) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> client = Connect(*server, 0);
  server.reset();
  const absl::Status status = client->Set("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(status, "is unreachable")) << status;
  EXPECT_EQ(client->ExitedRanks().status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ArrivalBoardTest, PostsOnlyCallsThatWaitLongerThanTheirDelay) {
  std::unique_ptr<StoreServer> server = StartServer();
  std::unique_ptr<StoreClient> client = Connect(*server, 0);
  std::unique_ptr<StoreClient> reader = Connect(*server, 1);
  ArrivalBoard board(client.get());
  std::shared_ptr<ArrivalBoard::Slot> fast = board.NewSlot("fast");
  std::shared_ptr<ArrivalBoard::Slot> slow = board.NewSlot("slow");
  fast->Enter(3, absl::Milliseconds(500));
  slow->Enter(7, absl::Milliseconds(20));
  const std::vector<std::string> keys = {"fast", "slow"};
  EXPECT_TRUE(Eventually([&] {
    return ArrivalBoard::ReadPosts(*reader, keys).value() ==
           std::vector<int64_t>{-1, 7};
  }));
  fast->Leave();
  slow->Leave();
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_EQ(ArrivalBoard::ReadPosts(*reader, keys).value(),
            (std::vector<int64_t>{-1, 7}));
  // A later call of the same slot replaces the post.
  slow->Enter(9, absl::ZeroDuration());
  EXPECT_TRUE(Eventually(
      [&] { return ArrivalBoard::ReadPosts(*reader, keys).value()[1] == 9; }));
}

CallSignature Signature(const std::string& key) {
  return CallSignature{"all_gather", key, "all_gather #4 (" + key + ")"};
}

// The records of `signatures` and `traffic` as an all-gather returns them.
std::vector<int64_t> Gathered(const std::vector<CallSignature>& signatures,
                              const std::vector<CallTraffic>& traffic) {
  std::vector<int64_t> records;
  for (size_t r = 0; r < signatures.size(); ++r) {
    const std::vector<int64_t> record =
        EncodeCallRecord(signatures[r], traffic[r], signatures.size());
    EXPECT_EQ(static_cast<int64_t>(record.size()),
              CallRecordSize(signatures.size()));
    records.insert(records.end(), record.begin(), record.end());
  }
  return records;
}

TEST(CallRecordsTest, EqualCallsWithMatchingTrafficPass) {
  const std::vector<CallSignature> calls(3, Signature("dim=0"));
  const std::vector<CallTraffic> traffic = {
      {{4, 8, 0}, {4, 0, 12}}, {{0, 8, 4}, {8, 8, 8}}, {{12, 8, 4}, {0, 4, 4}}};
  const std::vector<int64_t> records = Gathered(calls, traffic);
  EXPECT_FALSE(SignaturesDiffer(records, 3));
  EXPECT_TRUE(CheckTraffic(records, {0, 2, 5}, "all_to_all #1").ok());
}

TEST(CallRecordsTest, TrafficMismatchNamesThePair) {
  const std::vector<CallSignature> calls(2, Signature("dim=0"));
  // Rank 0 sends 8 bytes to rank 1, which expects 4.
  const std::vector<CallTraffic> traffic = {{{4, 8}, {4, 4}}, {{4, 4}, {4, 4}}};
  const absl::Status status =
      CheckTraffic(Gathered(calls, traffic), {3, 7}, "all_to_all #1");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "all_to_all #1: rank 3 sends 8 bytes to rank 7, which expects 4");
}

TEST(CallRecordsTest, DifferentSignaturesRoundTripThroughTheirTexts) {
  const std::vector<CallSignature> calls = {
      Signature("dim=0"), Signature("dim=0"), Signature("dim=1")};
  const std::vector<int64_t> records =
      Gathered(calls, std::vector<CallTraffic>(3));
  ASSERT_TRUE(SignaturesDiffer(records, 3));
  std::string texts;
  for (const CallSignature& call : calls) texts += EncodeSignatureText(call);
  absl::StatusOr<std::vector<CallSignature>> decoded =
      DecodeSignatureTexts(texts, SignatureTextLengths(records, 3));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ((*decoded)[r].op, calls[r].op);
    EXPECT_EQ((*decoded)[r].key, calls[r].key);
    EXPECT_EQ((*decoded)[r].text, calls[r].text);
  }
  EXPECT_FALSE(DecodeSignatureTexts(texts.substr(0, 10),
                                    SignatureTextLengths(records, 3))
                   .ok());
}

// Sets the launcher variables for one test and clears them after.
class LaunchEnvTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name :
         {kRankEnv, kWorldSizeEnv, kLocalRankEnv, kLocalWorldSizeEnv,
          kMasterAddrEnv, kMasterPortEnv, kAgentStoreEnv}) {
      ::unsetenv(name);
    }
  }
  void Set(const char* name, const char* value) { ::setenv(name, value, 1); }
  void SetRequired() {
    Set(kRankEnv, "3");
    Set(kWorldSizeEnv, "8");
    Set(kMasterAddrEnv, "node0");
    Set(kMasterPortEnv, "29500");
  }
};

TEST_F(LaunchEnvTest, ReadsTheLaunchersVariables) {
  SetRequired();
  Set(kLocalRankEnv, "1");
  Set(kLocalWorldSizeEnv, "2");
  Set(kAgentStoreEnv, "1");
  absl::StatusOr<LaunchEnv> env = LaunchEnvFromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_TRUE(env->agent_store);
}

TEST_F(LaunchEnvTest, LocalRankDefaultsToTheRank) {
  SetRequired();
  absl::StatusOr<LaunchEnv> env = LaunchEnvFromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 3);
  EXPECT_EQ(env->local_world_size, 8);
  EXPECT_FALSE(env->agent_store);
}

TEST_F(LaunchEnvTest, ErrorsNameTheVariable) {
  SetRequired();
  ::unsetenv(kMasterPortEnv);
  absl::Status status = LaunchEnvFromEnvironment().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status, "MASTER_PORT is not set")) << status;
  Set(kMasterPortEnv, "29500");
  Set(kRankEnv, "8");
  status = LaunchEnvFromEnvironment().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "RANK=\"8\" is not an integer in [0, 7]"))
      << status;
  Set(kRankEnv, "two");
  EXPECT_TRUE(Contains(LaunchEnvFromEnvironment().status(), "RANK=\"two\""));
  Set(kRankEnv, "0");
  Set(kMasterPortEnv, "70000");
  EXPECT_TRUE(
      Contains(LaunchEnvFromEnvironment().status(), "MASTER_PORT=\"70000\""));
}

}  // namespace
}  // namespace dtensor
