// Every rank of a save or load reaches the same outcome and none hangs when
// only one rank's state is bad (undefined, metadata-only, empty), when rank
// 0's commit fails, and when a commit crashed between its renames.
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/parallel/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/parallel/checkpoint_test_util.h"

namespace dtensor {
namespace {

namespace fs = std::filesystem;
using testing::TensorCase;

// On a (2, 2) mesh: "b.weight" [7, 5] f32 sharded on both mesh dims and, in
// a save, "c.sum" [4, 3] f32 Partial on d0 (a reduction before the writes).
std::vector<TensorCase> Cases(int64_t salt, bool with_partial) {
  std::vector<TensorCase> cases(1);
  cases[0].key = "b.weight";
  cases[0].full = *testing::PatternTensor({7, 5}, DType::kF32, salt);
  cases[0].placements = {Placement::Shard(0), Placement::Shard(1)};
  if (with_partial) {
    TensorCase partial;
    partial.key = "c.sum";
    partial.full = *testing::PatternTensor({4, 3}, DType::kF32, salt + 1);
    partial.placements = {Placement::Partial(), Placement::Shard(1)};
    cases.push_back(partial);
  }
  return cases;
}

const DeviceMesh& Mesh() {
  static const DeviceMesh* mesh = new DeviceMesh(*DeviceMesh::Create({2, 2}));
  return *mesh;
}

// Runs `fn` on 4 in-process ranks whose collectives give up after 20 s, so
// that a hang fails the test instead of stalling it.
std::vector<absl::Status> RunFourRanks(
    const std::function<absl::Status(std::shared_ptr<Runtime>)>& fn) {
  CommunicatorOptions options;
  options.default_deadline = absl::Seconds(20);
  return LocalCluster(4, options).RunPerRank([&](ProcessGroups& groups) {
    return fn(Runtime::ForRank(groups));
  });
}

// What rank 1's state holds instead of its DTensors (or besides them).
enum class Fault {
  kUndefined,          // an undefined DTensor besides its own
  kMetadataOnlyExtra,  // a metadata-only DTensor besides its own
  kOnlyMetadataOnly,   // a metadata-only DTensor only
};

nn::StateDict WithFault(nn::StateDict state, Fault fault) {
  const DTensorSpec spec = *DTensorSpec::Create(
      Mesh(), {Placement::Shard(0), Placement::Replicate()}, {4}, DType::kF32);
  const DTensor metadata_only =
      *DTensor::FromSpec(Runtime::MetadataOnly(1), spec);
  switch (fault) {
    case Fault::kUndefined:
      state["bad"] = DTensor();
      break;
    case Fault::kMetadataOnlyExtra:
      state["bad"] = metadata_only;
      break;
    case Fault::kOnlyMetadataOnly:
      state = {{"bad", metadata_only}};
      break;
  }
  return state;
}

// Rank `failed` returned `code`; every other rank Aborted naming it.
void ExpectFailedOn(const std::vector<absl::Status>& statuses, int64_t failed,
                    absl::StatusCode code) {
  for (int64_t r = 0; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    if (r == failed) {
      EXPECT_EQ(statuses[r].code(), code) << statuses[r];
      continue;
    }
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kAborted) << statuses[r];
    EXPECT_TRUE(
        absl::StrContains(statuses[r].message(), absl::StrCat("rank ", failed)))
        << statuses[r];
  }
}

absl::Status SaveCases(const std::string& dir, int64_t salt) {
  for (const absl::Status& s :
       RunFourRanks([&](std::shared_ptr<Runtime> runtime) -> absl::Status {
         DT_ASSIGN_OR_RETURN(
             nn::StateDict state,
             testing::DistributeCases(runtime, Mesh(), Cases(salt, true)));
         return parallel::SaveCheckpoint(dir, state);
       })) {
    DT_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

// Loads `dir` into Cases(9) on every rank; OK when every rank loaded the
// values of Cases(salt).
absl::Status LoadMatches(const std::string& dir, int64_t salt) {
  for (const absl::Status& s :
       RunFourRanks([&](std::shared_ptr<Runtime> runtime) -> absl::Status {
         DT_ASSIGN_OR_RETURN(
             nn::StateDict state,
             testing::DistributeCases(runtime, Mesh(), Cases(9, false)));
         DT_RETURN_IF_ERROR(parallel::LoadCheckpoint(dir, state));
         DT_ASSIGN_OR_RETURN(bool same,
                             testing::LocalMatches(state.at("b.weight"),
                                                   Cases(salt, false)[0].full));
         if (!same) return absl::InternalError("wrong values");
         return absl::OkStatus();
       })) {
    DT_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

TEST(CheckpointAgreementTest, BadStateOnOneRankFailsEveryRank) {
  const struct {
    Fault fault;
    absl::StatusCode code;
  } cases[] = {
      {Fault::kUndefined, absl::StatusCode::kInvalidArgument},
      {Fault::kMetadataOnlyExtra, absl::StatusCode::kFailedPrecondition},
      {Fault::kOnlyMetadataOnly, absl::StatusCode::kFailedPrecondition},
  };
  const std::string dir = testing::TestDirectory("bad_state");
  ASSERT_TRUE(SaveCases(dir, 1).ok());
  for (const auto& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.fault));
    for (bool save : {true, false}) {
      SCOPED_TRACE(save ? "save" : "load");
      ExpectFailedOn(
          RunFourRanks([&](std::shared_ptr<Runtime> runtime) -> absl::Status {
            DT_ASSIGN_OR_RETURN(
                nn::StateDict state,
                testing::DistributeCases(runtime, Mesh(), Cases(5, save)));
            if (runtime->rank() == 1) state = WithFault(state, c.fault);
            if (save) {
              parallel::SaveOptions options;
              options.groups = runtime->groups();
              return parallel::SaveCheckpoint(dir, state, options);
            }
            parallel::LoadCheckpointOptions options;
            options.groups = runtime->groups();
            return parallel::LoadCheckpoint(dir, state, options);
          }),
          1, c.code);
    }
  }
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  EXPECT_TRUE(LoadMatches(dir, 1).ok());
}

TEST(CheckpointAgreementTest, AnUndefinedTensorNeedsNoGroupsOption) {
  const std::string dir = testing::TestDirectory("undefined");
  ExpectFailedOn(
      RunFourRanks([&](std::shared_ptr<Runtime> runtime) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            nn::StateDict state,
            testing::DistributeCases(runtime, Mesh(), Cases(5, true)));
        if (runtime->rank() == 2) state = WithFault(state, Fault::kUndefined);
        return parallel::SaveCheckpoint(dir, state);
      }),
      2, absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
}

// Rank 3 holds no DTensor: the tensors live on a mesh of ranks 0 to 2.
TEST(CheckpointAgreementTest, RankHoldingNothingTakesPartWithGroups) {
  const std::string dir = testing::TestDirectory("bystander");
  const DeviceMesh mesh = *DeviceMesh::Create({3}, {}, {2, 0, 1});
  std::vector<TensorCase> cases = Cases(4, false);
  cases[0].placements = {Placement::Shard(1)};
  std::vector<TensorCase> targets = Cases(9, false);
  targets[0].placements = {Placement::Shard(0)};
  std::vector<absl::Status> statuses =
      RunFourRanks([&](std::shared_ptr<Runtime> runtime) -> absl::Status {
        nn::StateDict state, loaded;
        if (runtime->rank() != 3) {
          DT_ASSIGN_OR_RETURN(state,
                              testing::DistributeCases(runtime, mesh, cases));
          DT_ASSIGN_OR_RETURN(loaded,
                              testing::DistributeCases(runtime, mesh, targets));
        }
        parallel::SaveOptions save;
        save.groups = runtime->groups();
        DT_RETURN_IF_ERROR(parallel::SaveCheckpoint(dir, state, save));
        parallel::LoadCheckpointOptions load;
        load.groups = runtime->groups();
        DT_RETURN_IF_ERROR(parallel::LoadCheckpoint(dir, loaded, load));
        if (runtime->rank() == 3) return absl::OkStatus();
        DT_ASSIGN_OR_RETURN(
            bool same,
            testing::LocalMatches(loaded.at("b.weight"), cases[0].full));
        return same ? absl::OkStatus() : absl::InternalError("wrong values");
      });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

// A rank without DTensors on the (2, 2) mesh leaves its blocks unwritten
// (no Partial DTensor: its reduction would need that rank):
// rank 0's commit finds them missing, every rank fails, and neither the
// previous checkpoint nor a <dir>.tmp is disturbed.
TEST(CheckpointAgreementTest, FailedCommitRemovesTheTemporaryDirectory) {
  const std::string dir = testing::TestDirectory("commit");
  ASSERT_TRUE(SaveCases(dir, 1).ok());
  ExpectFailedOn(
      RunFourRanks([&](std::shared_ptr<Runtime> runtime) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            nn::StateDict state,
            testing::DistributeCases(runtime, Mesh(), Cases(2, false)));
        if (runtime->rank() == 3) state.clear();
        parallel::SaveOptions options;
        options.groups = runtime->groups();
        return parallel::SaveCheckpoint(dir, state, options);
      }),
      0, absl::StatusCode::kInternal);
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  EXPECT_TRUE(LoadMatches(dir, 1).ok());
}

// The state a crash between the two renames of a commit leaves where the
// file system cannot swap directories: no <dir>, the previous checkpoint as
// <dir>.old and the new one as <dir>.tmp.
TEST(CheckpointAgreementTest, LoadRecoversFromACrashBetweenRenames) {
  const std::string dir = testing::TestDirectory("renames");
  ASSERT_TRUE(SaveCases(dir, 1).ok());
  ASSERT_TRUE(SaveCases(dir + "_next", 2).ok());
  std::error_code error;
  fs::rename(dir, dir + ".old", error);
  ASSERT_FALSE(error) << error.message();
  fs::rename(dir + "_next", dir + ".tmp", error);
  ASSERT_FALSE(error) << error.message();
  EXPECT_TRUE(LoadMatches(dir, 1).ok());
  // The next save commits over it and clears both leftovers.
  ASSERT_TRUE(SaveCases(dir, 3).ok());
  EXPECT_TRUE(LoadMatches(dir, 3).ok());
  EXPECT_FALSE(fs::exists(dir + ".old"));
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  // A save over an existing checkpoint swaps it and leaves no leftovers.
  ASSERT_TRUE(SaveCases(dir, 4).ok());
  EXPECT_TRUE(LoadMatches(dir, 4).ok());
  EXPECT_FALSE(fs::exists(dir + ".old"));
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
}

}  // namespace
}  // namespace dtensor
