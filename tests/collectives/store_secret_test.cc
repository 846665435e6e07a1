// The rendezvous store admits only its job: a client without the job's
// secret, or with another, can neither read nor write (store_server.h); the
// secret comes from dtrun or the environment (store_secret.h).
#include "dtensor/collectives/multiprocess/store_secret.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_server.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr char kSecret[] = "0123456789abcdef-the-jobs-secret";

std::unique_ptr<StoreServer> StartServer(const std::string& secret) {
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", 0, secret);
  EXPECT_TRUE(server.ok()) << server.status();
  return *std::move(server);
}

absl::StatusOr<std::unique_ptr<StoreClient>> Connect(
    const StoreServer& server, int64_t rank, const std::string& secret) {
  return StoreClient::Connect("127.0.0.1", server.port(), rank,
                              absl::Seconds(5), secret);
}

std::unique_ptr<StoreClient> Stranger(const StoreServer& server) {
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::ConnectWithoutHello("127.0.0.1", server.port(),
                                       absl::Seconds(5));
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

TEST(StoreSecretTest, AClientWithTheSecretReadsAndWrites) {
  std::unique_ptr<StoreServer> server = StartServer(kSecret);
  auto rank0 = Connect(*server, 0, kSecret);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  auto observer = Connect(*server, -1, kSecret);
  ASSERT_TRUE(observer.ok()) << observer.status();
  ASSERT_TRUE((*rank0)->Set("key", "value").ok());
  auto values = (*observer)->MultiGet({"key"});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0], "value");
}

TEST(StoreSecretTest, AClientWithoutTheSecretCanNeitherWriteNorRead) {
  std::unique_ptr<StoreServer> server = StartServer(kSecret);
  auto rank0 = Connect(*server, 0, kSecret);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE((*rank0)->Set("group0/mesh/0", "rank 0's address").ok());

  std::unique_ptr<StoreClient> writer = Stranger(*server);
  const absl::Status set = writer->Set("group0/mesh/0", "a stranger's");
  EXPECT_EQ(set.code(), absl::StatusCode::kPermissionDenied) << set;
  EXPECT_TRUE(absl::StrContains(set.message(), "DTENSOR_STORE_SECRET")) << set;
  // The store closed the connection: nothing more goes through it.
  EXPECT_EQ(writer->Set("k", "v").code(), absl::StatusCode::kUnavailable);

  std::unique_ptr<StoreClient> reader = Stranger(*server);
  EXPECT_EQ(reader->MultiGet({"group0/mesh/0"}).status().code(),
            absl::StatusCode::kPermissionDenied);
  std::unique_ptr<StoreClient> asker = Stranger(*server);
  EXPECT_EQ(asker->ExitedRanks().status().code(),
            absl::StatusCode::kPermissionDenied);

  auto values = (*rank0)->MultiGet({"group0/mesh/0"});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0], "rank 0's address");
}

TEST(StoreSecretTest, AWrongSecretIsRefusedAndClaimsNoRank) {
  std::unique_ptr<StoreServer> server = StartServer(kSecret);
  for (const std::string wrong :
       {std::string(""), std::string(kSecret) + "x",
        std::string(kSecret).substr(1), std::string("1") + (kSecret + 1)}) {
    auto impostor = Connect(*server, 0, wrong);
    EXPECT_EQ(impostor.status().code(), absl::StatusCode::kPermissionDenied)
        << "secret \"" << wrong << "\": " << impostor.status();
  }
  // Rank 0 never said hello, so its impostors' closing marked nothing.
  auto observer = Connect(*server, -1, kSecret);
  ASSERT_TRUE(observer.ok()) << observer.status();
  auto exited = (*observer)->ExitedRanks();
  ASSERT_TRUE(exited.ok()) << exited.status();
  EXPECT_TRUE(exited->empty());
}

TEST(StoreSecretTest, AStoreWithoutASecretServesEveryClient) {
  std::unique_ptr<StoreServer> server = StartServer("");
  std::unique_ptr<StoreClient> anyone = Stranger(*server);
  EXPECT_TRUE(anyone->Set("k", "v").ok());
}

TEST(StoreSecretTest, NewSecretsAreLongAndDiffer) {
  absl::StatusOr<std::string> a = NewStoreSecret();
  absl::StatusOr<std::string> b = NewStoreSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
}

TEST(StoreSecretTest, SecretsMatchOnlyWhenEqual) {
  EXPECT_TRUE(SecretsMatch("abc", "abc"));
  EXPECT_FALSE(SecretsMatch("abd", "abc"));
  EXPECT_FALSE(SecretsMatch("ab", "abc"));
  EXPECT_FALSE(SecretsMatch("abcd", "abc"));
  EXPECT_FALSE(SecretsMatch("", "abc"));
}

class SecretEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv(kStoreSecretEnv);
    ::unsetenv(kStoreSecretFileEnv);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(SecretEnvironmentTest, TheVariableComesFirstThenTheFile) {
  EXPECT_EQ(StoreSecretFromEnvironment().value(), "");
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/store_secret";
  std::ofstream(path) << "from-the-file\n";
  ::setenv(kStoreSecretFileEnv, path.c_str(), 1);
  EXPECT_EQ(StoreSecretFromEnvironment().value(), "from-the-file");
  ::setenv(kStoreSecretEnv, "from-the-variable", 1);
  EXPECT_EQ(StoreSecretFromEnvironment().value(), "from-the-variable");
}

TEST_F(SecretEnvironmentTest, AnUnreadableFileNamesTheVariable) {
  ::setenv(kStoreSecretFileEnv, "/no/such/secret", 1);
  const absl::Status status = StoreSecretFromEnvironment().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), kStoreSecretFileEnv))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "/no/such/secret")) << status;
}

}  // namespace
}  // namespace dtensor
