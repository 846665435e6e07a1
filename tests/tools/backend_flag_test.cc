// ParseBackendFlag and BackendFlagValues (tools/backend_flag.h): the
// registry's names, an unknown name, a backend on a device it does not run
// on.
#include "tools/backend_flag.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(BackendFlagTest, ValuesAreTheRegisteredNames) {
  EXPECT_EQ(BackendFlagValues(), "inprocess|gloo|nccl");
}

TEST(BackendFlagTest, FindsABackendOnItsDevice) {
  absl::StatusOr<BackendDef> gloo = ParseBackendFlag("gloo", DeviceType::kCPU);
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_TRUE(gloo->RunsOn(DeviceType::kCPU));
  EXPECT_TRUE(ParseBackendFlag("inprocess", DeviceType::kCUDA).ok());
}

TEST(BackendFlagTest, UnknownNameListsTheBackends) {
  const absl::Status status =
      ParseBackendFlag("mpi", DeviceType::kCPU).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(status.message(), "--backend")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "inprocess, gloo, nccl"))
      << status;
}

TEST(BackendFlagTest, RejectsABackendOffItsDevice) {
  const absl::Status status =
      ParseBackendFlag("gloo", DeviceType::kCUDA).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(
      status.message(),
      "--backend gloo does not run on cuda tensors (it runs on cpu)"))
      << status;
  EXPECT_FALSE(ParseBackendFlag("nccl", DeviceType::kCPU).ok());
}

}  // namespace
}  // namespace dtensor
