// Backends by name (dtensor/collectives/backend_registry.h): the built-in
// ones, the errors of lookups and registrations, and the worked example of
// docs/collectives.md, a user backend registered and run by name.
#include "dtensor/collectives/backend_registry.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/cluster_state.h"
#include "dtensor/collectives/inprocess/local_backend.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// docs/collectives.md, "Adding a backend": a toy backend in which every
// process is a world of its own, one rank on the in-process backend. A real
// one joins its job from the launcher's environment (launch_env.h) here.
absl::StatusOr<std::shared_ptr<Backend>> SoloFromEnv(
    CommunicatorOptions communicator) {
  auto cluster = std::make_shared<ClusterState>(1, std::move(communicator));
  return std::make_shared<LocalBackend>(std::move(cluster), /*rank=*/0);
}

const BackendRegistration kSolo("solo", ProcessPerRank(SoloFromEnv,
                                                       {DeviceType::kCPU}));
// End of the example.

// A definition that runs no rank.
BackendDef Idle() {
  BackendDef def;
  def.devices = {DeviceType::kCPU};
  def.run = [](const RankLaunch&, const RankFunction&) {
    return absl::OkStatus();
  };
  return def;
}

// Sums each rank's (rank + 1) over the world of `backend`; every rank's sum.
absl::StatusOr<std::vector<float>> SumOfRanks(absl::string_view backend,
                                              int64_t world_size) {
  DT_ASSIGN_OR_RETURN(BackendDef def, BackendRegistry::Global().Find(backend));
  RankLaunch launch;
  launch.world_size = world_size;
  std::vector<float> sums(world_size, 0);
  DT_RETURN_IF_ERROR(
      def.run(launch, [&](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        DT_ASSIGN_OR_RETURN(
            Tensor value,
            Tensor::Full({1}, static_cast<double>(groups.rank() + 1),
                         DType::kF32));
        DT_RETURN_IF_ERROR(world->AllReduce(value, ReduceOp::kSum));
        sums[groups.rank()] = static_cast<float>(value.Item().value_or(-1));
        return absl::OkStatus();
      }));
  return sums;
}

TEST(BackendRegistryTest, GlobalStartsWithTheBuiltins) {
  const std::vector<std::string> names = BackendRegistry::Global().Names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
            (std::vector<std::string>{"inprocess", "gloo", "nccl"}));
}

TEST(BackendRegistryTest, BuiltinsRunOnTheirDevices) {
  const BackendRegistry& registry = BackendRegistry::Global();
  absl::StatusOr<BackendDef> inprocess = registry.Find("inprocess");
  absl::StatusOr<BackendDef> gloo = registry.Find("gloo");
  absl::StatusOr<BackendDef> nccl = registry.Find("nccl");
  ASSERT_TRUE(inprocess.ok() && gloo.ok() && nccl.ok());
  EXPECT_TRUE(inprocess->RunsOn(DeviceType::kCPU));
  EXPECT_TRUE(inprocess->RunsOn(DeviceType::kCUDA));
  EXPECT_TRUE(gloo->RunsOn(DeviceType::kCPU));
  EXPECT_FALSE(gloo->RunsOn(DeviceType::kCUDA));
  EXPECT_FALSE(nccl->RunsOn(DeviceType::kCPU));
  EXPECT_TRUE(nccl->RunsOn(DeviceType::kCUDA));
}

TEST(BackendRegistryTest, InProcessRunsTheWorldOnThreads) {
  absl::StatusOr<std::vector<float>> sums = SumOfRanks("inprocess", 4);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, std::vector<float>(4, 10));
}

TEST(BackendRegistryTest, UnknownNameListsTheRegisteredOnes) {
  const absl::Status status = BackendRegistry::Global().Find("mpi").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(status.message(), "\"mpi\"")) << status;
  EXPECT_TRUE(
      absl::StrContains(status.message(), "inprocess, gloo, nccl, solo"))
      << status;
}

TEST(BackendRegistryTest, DuplicateRegistrationFails) {
  BackendRegistry registry;
  ASSERT_TRUE(registry.Register("idle", Idle()).ok());
  const absl::Status status = registry.Register("idle", Idle());
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(status.message(), "\"idle\"")) << status;
  EXPECT_EQ(BackendRegistry::Global().Register("gloo", Idle()).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BackendRegistration("solo", Idle()).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(BackendRegistryTest, IncompleteRegistrationsFail) {
  BackendRegistry registry;
  EXPECT_EQ(registry.Register("", Idle()).code(),
            absl::StatusCode::kInvalidArgument);
  BackendDef no_run = Idle();
  no_run.run = nullptr;
  const absl::Status status = registry.Register("no_run", no_run);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "no_run")) << status;
  BackendDef no_device = Idle();
  no_device.devices.clear();
  EXPECT_EQ(registry.Register("no_device", no_device).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.Names().empty());
}

TEST(BackendRegistryTest, UserBackendRunsByName) {
  ASSERT_TRUE(kSolo.status().ok()) << kSolo.status();
  // A process per rank: this process is its one rank, whatever world size
  // the program asks for in-process.
  absl::StatusOr<std::vector<float>> sums = SumOfRanks("solo", 1);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, std::vector<float>{1});
}

}  // namespace
}  // namespace dtensor
