// Checkpoint faults and mismatches: a save that fails midway keeps the last
// good checkpoint; corrupt, truncated or missing files are reported naming
// the tensor, block and file; loads into mismatched states name the key;
// after any failed load no tensor has changed on any rank.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/parallel/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/parallel/checkpoint_test_util.h"

namespace dtensor {
namespace {

namespace fs = std::filesystem;
using testing::TensorCase;

// Two tensors on a (2, 2) mesh: "b.weight" [7, 5] f32 sharded on both mesh
// dims, "a.bias" [6] bf16 sharded on d0 and replicated on d1. Values depend
// on `salt`.
std::vector<TensorCase> Cases(int64_t salt) {
  std::vector<TensorCase> cases(2);
  cases[0].key = "b.weight";
  cases[0].full = *testing::PatternTensor({7, 5}, DType::kF32, salt);
  cases[0].placements = {Placement::Shard(0), Placement::Shard(1)};
  cases[1].key = "a.bias";
  cases[1].full = *testing::PatternTensor({6}, DType::kBF16, salt + 1);
  cases[1].placements = {Placement::Shard(0), Placement::Replicate()};
  return cases;
}

const DeviceMesh& Mesh() {
  static const DeviceMesh* mesh = new DeviceMesh(*DeviceMesh::Create({2, 2}));
  return *mesh;
}

// Saves Cases(salt) on Mesh() with `options`; returns every rank's status.
std::vector<absl::Status> Save(const std::string& dir, int64_t salt,
                               const parallel::SaveOptions& options = {}) {
  return testing::RunRanks(
      4, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            nn::StateDict state,
            testing::DistributeCases(runtime, Mesh(), Cases(salt)));
        return parallel::SaveCheckpoint(dir, state, options);
      });
}

// Loads `dir` into the tensors of `targets` (laid out on Mesh()) and
// returns every rank's load status; a rank whose load succeeded checks its
// shards against `expected`, one whose load failed checks that its shards
// still hold the targets' values.
std::vector<absl::Status> LoadAndCheck(
    const std::string& dir, const std::vector<TensorCase>& targets,
    const std::vector<TensorCase>& expected) {
  std::vector<absl::Status> loads(4);
  std::vector<absl::Status> checks = testing::RunRanks(
      4, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
        DT_ASSIGN_OR_RETURN(nn::StateDict state,
                            testing::DistributeCases(runtime, Mesh(), targets));
        absl::Status load = parallel::LoadCheckpoint(dir, state);
        loads[runtime->rank()] = load;
        const std::vector<TensorCase>& want = load.ok() ? expected : targets;
        for (const TensorCase& c : want) {
          // A Partial shard holds a term, not the block's values.
          if (absl::c_any_of(c.placements, [](const Placement& p) {
                return p.is_partial();
              })) {
            continue;
          }
          DT_ASSIGN_OR_RETURN(bool same,
                              testing::LocalMatches(state.at(c.key), c.full));
          if (!same) {
            return absl::InternalError(absl::StrCat(
                c.key, " holds wrong values on rank ", runtime->rank()));
          }
        }
        return absl::OkStatus();
      });
  for (const absl::Status& check : checks) EXPECT_TRUE(check.ok()) << check;
  return loads;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

// Every rank failed: at least one with `code` and a message containing each
// of `words`, the others Aborted.
void ExpectFailure(const std::vector<absl::Status>& statuses,
                   absl::StatusCode code,
                   const std::vector<std::string>& words) {
  int with_code = 0;
  for (const absl::Status& s : statuses) {
    ASSERT_FALSE(s.ok());
    if (s.code() == absl::StatusCode::kAborted) {
      EXPECT_TRUE(absl::StrContains(s.message(), "rank ")) << s;
      continue;
    }
    EXPECT_EQ(s.code(), code) << s;
    for (const std::string& word : words) {
      EXPECT_TRUE(absl::StrContains(s.message(), word))
          << s << " lacks " << word;
    }
    ++with_code;
  }
  EXPECT_GE(with_code, 1);
}

void FlipByte(const std::string& path, int64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char byte = 0;
  file.read(&byte, 1);
  byte ^= 0x10;
  file.seekp(offset);
  file.write(&byte, 1);
}

TEST(CheckpointFaultTest, SaveFailingBetweenBlocksKeepsThePreviousCheckpoint) {
  const std::string dir = testing::TestDirectory("crash");
  ExpectAllOk(Save(dir, 1));
  // A leftover of an earlier crash does not disturb the next save.
  fs::create_directories(dir + ".tmp");
  std::ofstream(dir + ".tmp/data_0.bin") << "junk";
  parallel::SaveOptions failing;
  failing.before_block = [](int64_t written) -> absl::Status {
    // Rank identity is not passed: every rank stops after its first block.
    return written == 1 ? absl::DataLossError("injected crash")
                        : absl::OkStatus();
  };
  const std::vector<absl::Status> saves = Save(dir, 2, failing);
  int injected = 0;
  for (const absl::Status& s : saves) {
    ASSERT_FALSE(s.ok());
    injected += absl::StrContains(s.message(), "injected crash");
  }
  EXPECT_GE(injected, 1);
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  ExpectAllOk(LoadAndCheck(dir, Cases(9), Cases(1)));
  // A save that succeeds replaces it.
  ExpectAllOk(Save(dir, 3));
  ExpectAllOk(LoadAndCheck(dir, Cases(9), Cases(3)));
  EXPECT_FALSE(fs::exists(dir + ".old"));
}

TEST(CheckpointFaultTest, SaveFailingOnOneRankFailsEveryRank) {
  const std::string dir = testing::TestDirectory("one_rank");
  std::vector<absl::Status> saves = testing::RunRanks(
      4, [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            nn::StateDict state,
            testing::DistributeCases(runtime, Mesh(), Cases(1)));
        parallel::SaveOptions options;
        const int64_t rank = runtime->rank();
        options.before_block = [rank](int64_t) {
          return rank == 2 ? absl::DataLossError("disk full on rank 2")
                           : absl::OkStatus();
        };
        return parallel::SaveCheckpoint(dir, state, options);
      });
  for (int64_t r = 0; r < 4; ++r) {
    if (r == 2) {
      EXPECT_TRUE(absl::StrContains(saves[r].message(), "disk full"))
          << saves[r];
    } else {
      EXPECT_EQ(saves[r].code(), absl::StatusCode::kAborted) << saves[r];
      EXPECT_TRUE(absl::StrContains(saves[r].message(), "rank 2")) << saves[r];
    }
  }
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CheckpointFaultTest, FlippedByteInEveryDataFileIsDetected) {
  const std::string dir = testing::TestDirectory("flip");
  ExpectAllOk(Save(dir, 1));
  for (int64_t rank = 0; rank < 4; ++rank) {
    const std::string file = absl::StrCat(dir, "/data_", rank, ".bin");
    const int64_t size = fs::file_size(file);
    for (int64_t offset : {int64_t{0}, size / 2, size - 1}) {
      SCOPED_TRACE(absl::StrCat(file, " byte ", offset));
      FlipByte(file, offset);
      ExpectFailure(LoadAndCheck(dir, Cases(9), Cases(1)),
                    absl::StatusCode::kDataLoss,
                    {"checksum mismatch", absl::StrCat("data_", rank, ".bin"),
                     "tensor \"", "block "});
      FlipByte(file, offset);
    }
  }
  ExpectAllOk(LoadAndCheck(dir, Cases(9), Cases(1)));
}

TEST(CheckpointFaultTest, TruncatedOrMissingFilesAreReported) {
  const std::string dir = testing::TestDirectory("truncate");
  ExpectAllOk(Save(dir, 1));
  const std::string metadata = dir + "/metadata.json";
  const std::string data = dir + "/data_3.bin";
  // Backups in a directory of this test's own; file-system calls that
  // report errors instead of throwing.
  const std::string backups = testing::TestDirectory("truncate_backups");
  const std::string metadata_backup = backups + "/metadata.json";
  const std::string data_backup = backups + "/data_3.bin";
  std::error_code error;
  fs::create_directories(backups, error);
  ASSERT_FALSE(error) << backups << ": " << error.message();
  const int64_t metadata_size = fs::file_size(metadata, error);
  ASSERT_FALSE(error) << metadata << ": " << error.message();
  const int64_t data_size = fs::file_size(data, error);
  ASSERT_FALSE(error) << data << ": " << error.message();
  auto copy = [&](const std::string& from, const std::string& to) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, error);
    return !error;
  };
  ASSERT_TRUE(copy(metadata, metadata_backup)) << error.message();
  ASSERT_TRUE(copy(data, data_backup)) << error.message();

  for (int64_t size : {int64_t{0}, metadata_size / 3, metadata_size - 3}) {
    SCOPED_TRACE(absl::StrCat("metadata cut to ", size));
    fs::resize_file(metadata, size, error);
    ASSERT_FALSE(error) << error.message();
    ExpectFailure(LoadAndCheck(dir, Cases(9), Cases(1)),
                  absl::StatusCode::kDataLoss, {"metadata"});
    ASSERT_TRUE(copy(metadata_backup, metadata)) << error.message();
  }
  fs::resize_file(data, data_size - 1, error);
  ASSERT_FALSE(error) << error.message();
  ExpectFailure(LoadAndCheck(dir, Cases(9), Cases(1)),
                absl::StatusCode::kDataLoss, {"data_3.bin", "truncated"});
  ASSERT_TRUE(fs::remove(data, error)) << error.message();
  ExpectFailure(LoadAndCheck(dir, Cases(9), Cases(1)),
                absl::StatusCode::kNotFound, {"data_3.bin", "missing"});
  ASSERT_TRUE(copy(data_backup, data)) << error.message();
  ExpectAllOk(LoadAndCheck(dir, Cases(9), Cases(1)));
  ASSERT_TRUE(fs::remove(metadata, error)) << error.message();
  ExpectFailure(LoadAndCheck(dir, Cases(9), Cases(1)),
                absl::StatusCode::kNotFound, {"metadata.json"});
}

TEST(CheckpointFaultTest, MismatchedStateNamesTheKey) {
  const std::string dir = testing::TestDirectory("mismatch");
  ExpectAllOk(Save(dir, 1));
  std::vector<TensorCase> missing = Cases(9);
  missing[0].key = "c.extra";
  ExpectFailure(LoadAndCheck(dir, missing, missing),
                absl::StatusCode::kInvalidArgument,
                {"\"c.extra\"", "not in the checkpoint"});
  std::vector<TensorCase> shape = Cases(9);
  shape[0].full = *testing::PatternTensor({7, 4}, DType::kF32, 0);
  ExpectFailure(LoadAndCheck(dir, shape, shape),
                absl::StatusCode::kInvalidArgument,
                {"\"b.weight\"", "shape [7, 5]", "[7, 4]"});
  std::vector<TensorCase> dtype = Cases(9);
  dtype[1].full = *testing::PatternTensor({6}, DType::kF32, 0);
  ExpectFailure(LoadAndCheck(dir, dtype, dtype),
                absl::StatusCode::kInvalidArgument,
                {"\"a.bias\"", "dtype bf16", "f32"});
  std::vector<TensorCase> partial = Cases(9);
  partial[1].placements = {Placement::Shard(0), Placement::Partial()};
  ExpectFailure(LoadAndCheck(dir, partial, partial),
                absl::StatusCode::kInvalidArgument, {"\"a.bias\"", "Partial"});
  // A checkpoint key the state lacks is not an error.
  std::vector<TensorCase> fewer = Cases(9);
  fewer.pop_back();
  ExpectAllOk(LoadAndCheck(dir, fewer, {Cases(1)[0]}));
}

TEST(CheckpointFaultTest, BadArgumentsAreErrors) {
  const std::shared_ptr<Runtime> metadata_only = Runtime::MetadataOnly(0);
  const DTensorSpec spec = *DTensorSpec::Create(
      Mesh(), {Placement::Shard(0), Placement::Replicate()}, {4}, DType::kF32);
  nn::StateDict state;
  state["w"] = *DTensor::FromSpec(metadata_only, spec);
  const std::string dir = testing::TestDirectory("bad");
  EXPECT_EQ(parallel::SaveCheckpoint(dir, state).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(parallel::LoadCheckpoint(dir, state).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(parallel::SaveCheckpoint(dir, {}).code(),
            absl::StatusCode::kInvalidArgument);
  nn::StateDict undefined;
  undefined["x"] = DTensor();
  const absl::Status status = parallel::LoadCheckpoint(dir, undefined);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "\"x\"")) << status;
  parallel::SaveOptions zero_chunks;
  zero_chunks.chunk_bytes = 0;
  EXPECT_EQ(parallel::SaveCheckpoint(dir, state, zero_chunks).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dtensor
