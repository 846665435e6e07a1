// LaunchEnvFrom on the variables of each launcher (torchrun/dtrun, Slurm's
// srun, Open MPI's mpirun), given as a map: which launcher's variables win,
// the defaults, the store's address and the errors; FirstSlurmHost on Slurm's
// host lists.
#include "dtensor/collectives/multiprocess/launch_env.h"

#include <map>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

using Env = std::map<std::string, std::string>;

absl::StatusOr<LaunchEnv> From(const Env& env) {
  return LaunchEnvFrom([&env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST(LaunchEnvFromTest, Torchrun) {
  absl::StatusOr<LaunchEnv> env = From({{"RANK", "3"},
                                        {"WORLD_SIZE", "8"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "node0"},
                                        {"MASTER_PORT", "1234"},
                                        {"SLURM_PROCID", "5"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 1234);
  // torchrun's MASTER_PORT has no default.
  absl::Status status =
      From({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status, "MASTER_PORT is not set")) << status;
}

TEST(LaunchEnvFromTest, SlurmWithTheFirstNodeAsMaster) {
  absl::StatusOr<LaunchEnv> env =
      From({{"SLURM_PROCID", "5"},
            {"SLURM_NTASKS", "8"},
            {"SLURM_LOCALID", "1"},
            {"SLURM_NTASKS_PER_NODE", "4(x2)"},
            {"SLURM_NODELIST", "gpu[07-08]"},
            {"SLURM_STEP_NODELIST", "gpu[03-04,09],cpu1"},
            {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.9"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "slurm");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "gpu03");
  EXPECT_EQ(env->master_port, kDefaultMasterPort);
  EXPECT_FALSE(env->agent_store);
}

TEST(LaunchEnvFromTest, SlurmFallbacks) {
  // No step list: the job's; no list: the launch node; uneven tasks per node:
  // the world size; MASTER_ADDR and MASTER_PORT, when set, win.
  Env slurm = {{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "3"},
               {"SLURM_NTASKS_PER_NODE", "2,1"},
               {"SLURM_NODELIST", "a,b"}};
  absl::StatusOr<LaunchEnv> env = From(slurm);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "a");
  EXPECT_EQ(env->local_world_size, 3);
  slurm.erase("SLURM_NODELIST");
  slurm["SLURM_LAUNCH_NODE_IPADDR"] = "10.0.0.9";
  env = From(slurm);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "10.0.0.9");
  slurm["MASTER_ADDR"] = "head";
  slurm["MASTER_PORT"] = "4000";
  env = From(slurm);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "head");
  EXPECT_EQ(env->master_port, 4000);
}

TEST(LaunchEnvFromTest, OpenMpi) {
  Env mpi = {{"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "2"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  absl::StatusOr<LaunchEnv> env = From(mpi);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "openmpi");
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 2);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  // One node: the store on this host.
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, kDefaultMasterPort);
  // Several nodes: rank 0's host is not known.
  mpi["OMPI_COMM_WORLD_SIZE"] = "4";
  absl::Status status = From(mpi).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status,
                       "MASTER_ADDR is not set and openmpi's "
                       "variables name no host of rank 0 (a job of "
                       "4 ranks, 2 on this node)"))
      << status;
  mpi["MASTER_ADDR"] = "node0";
  env = From(mpi);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "node0");
}

TEST(LaunchEnvFromTest, ErrorsNameTheLaunchersVariable) {
  absl::Status status = From({}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status,
                       "WORLD_SIZE is not set (start the processes "
                       "with dtrun, torchrun, srun or mpirun"))
      << status;
  status = From({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      Contains(status, "SLURM_PROCID=\"4\" is not an integer in [0, 3]"))
      << status;
  status = From({{"OMPI_COMM_WORLD_RANK", "0"}}).status();
  EXPECT_TRUE(Contains(status, "OMPI_COMM_WORLD_SIZE is not set")) << status;
  status = From({{"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "1"},
                 {"SLURM_NODELIST", "n[1-2"}})
               .status();
  EXPECT_TRUE(Contains(status, "Slurm node list \"n[1-2\"")) << status;
}

TEST(FirstSlurmHostTest, ExpandsTheFirstRangeOfEachBracket) {
  EXPECT_EQ(*FirstSlurmHost("node1"), "node1");
  EXPECT_EQ(*FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(*FirstSlurmHost("n[07-09,12]x,y"), "n07x");
  EXPECT_EQ(*FirstSlurmHost("n[12,07-09]"), "n12");
  EXPECT_EQ(*FirstSlurmHost("gpu[1-2]-[3-4]"), "gpu1-3");
  EXPECT_FALSE(FirstSlurmHost("").ok());
  EXPECT_FALSE(FirstSlurmHost("n[1").ok());
  EXPECT_FALSE(FirstSlurmHost("n]1").ok());
}

}  // namespace
}  // namespace dtensor
