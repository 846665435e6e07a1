// SaveCheckpoint on one mesh and layout, LoadCheckpoint on another, for
// random pairs of meshes (1 to 8 ranks, 1-D to 3-D, shuffled rank lists),
// layouts (Shard, Replicate, Partial on save; any nesting order) and uneven
// shapes, in f32, bf16 and i64. Checked against the test's own model: the
// loaded shards equal the original values exactly; the ranks together write
// every element once; each rank reads exactly the checksum chunks that
// hold its elements (found by enumerating elements).
#include <cstdint>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/parallel/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/parallel/checkpoint_test_util.h"

namespace dtensor {
namespace {

using parallel::CheckpointStats;
using testing::TensorCase;

// The distinct non-empty blocks that the ranks of `spec`'s mesh hold.
std::vector<ShardBlock> DistinctBlocks(const DTensorSpec& spec) {
  std::vector<ShardBlock> blocks;
  for (int64_t rank : spec.mesh().Ranks()) {
    ShardBlock block = *spec.BlockOf(rank);
    if (block.numel() == 0) continue;
    bool seen = false;
    for (const ShardBlock& b : blocks) seen = seen || b == block;
    if (!seen) blocks.push_back(block);
  }
  return blocks;
}

// The bytes a rank holding `target` must read from a checkpoint whose
// blocks are `stored`: the sizes of the chunks (of `chunk_bytes`, per stored
// block) that hold a byte of one of its elements, found element by element.
int64_t ChunkBytesToRead(const std::vector<ShardBlock>& stored,
                         const ShardBlock& target, int64_t element_size,
                         int64_t chunk_bytes) {
  std::set<std::pair<size_t, int64_t>> chunks;
  const size_t rank = target.shape.size();
  for (int64_t i = 0; i < target.numel(); ++i) {
    std::vector<int64_t> global(rank);
    int64_t rest = i;
    for (size_t d = rank; d-- > 0;) {
      global[d] = target.offset[d] + rest % target.shape[d];
      rest /= target.shape[d];
    }
    for (size_t b = 0; b < stored.size(); ++b) {
      bool inside = true;
      int64_t index = 0;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t local = global[d] - stored[b].offset[d];
        inside = inside && local >= 0 && local < stored[b].shape[d];
        index = index * stored[b].shape[d] + local;
      }
      if (!inside) continue;
      chunks.insert({b, index * element_size / chunk_bytes});
      chunks.insert({b, ((index + 1) * element_size - 1) / chunk_bytes});
    }
  }
  int64_t bytes = 0;
  for (const auto& [b, chunk] : chunks) {
    const int64_t block_bytes = stored[b].numel() * element_size;
    bytes += std::min(chunk_bytes, block_bytes - chunk * chunk_bytes);
  }
  return bytes;
}

std::string PlacementsText(const std::vector<Placement>& placements) {
  std::string text;
  for (const Placement& p : placements) {
    absl::StrAppend(&text, text.empty() ? "" : ",", p.ToString());
  }
  return text;
}

absl::Status Check(bool condition, const std::string& what) {
  return condition ? absl::OkStatus() : absl::InternalError(what);
}

void ExpectAllOk(const std::vector<absl::Status>& statuses,
                 const std::string& what) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok())
        << what << " rank " << r << ": " << statuses[r];
  }
}

TEST(CheckpointReshardTest, RandomMeshAndShardingPairsRoundTripExactly) {
  std::mt19937 rng(20261122);
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kI64};
  const int64_t chunk_sizes[] = {8, 24, int64_t{1} << 20};
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t save_size = std::uniform_int_distribution<int>(1, 8)(rng);
    const int64_t load_size = std::uniform_int_distribution<int>(1, 8)(rng);
    const DeviceMesh save_mesh = testing::RandomMesh(save_size, rng);
    const DeviceMesh load_mesh = testing::RandomMesh(load_size, rng);
    const int64_t chunk_bytes = chunk_sizes[rng() % 3];
    std::vector<TensorCase> saved, loaded;
    const int num_tensors = std::uniform_int_distribution<int>(1, 3)(rng);
    int64_t total_bytes = 0;
    for (int k = 0; k < num_tensors; ++k) {
      const int64_t rank = std::uniform_int_distribution<int>(0, 3)(rng);
      Shape shape;
      for (int64_t d = 0; d < rank; ++d) {
        shape.push_back(rng() % 12 == 0
                            ? 0
                            : std::uniform_int_distribution<int>(1, 9)(rng));
      }
      const DType dtype = dtypes[rng() % 3];
      TensorCase c;
      c.key = absl::StrCat("layers.", k, ".weight");
      c.full = *testing::PatternTensor(shape, dtype, k);
      TensorCase target = c;
      target.full = *testing::PatternTensor(shape, dtype, k + 50);
      testing::RandomSharding(save_mesh, rank, true, rng, c.placements,
                              c.order);
      testing::RandomSharding(load_mesh, rank, false, rng, target.placements,
                              target.order);
      total_bytes += c.full.nbytes();
      saved.push_back(std::move(c));
      loaded.push_back(std::move(target));
    }
    std::string description = absl::StrCat(
        "trial ", trial, ": save on ", save_mesh.ToString(), ", load on ",
        load_mesh.ToString(), ", chunk ", chunk_bytes);
    for (size_t k = 0; k < saved.size(); ++k) {
      absl::StrAppend(&description, "; ", saved[k].key, " ",
                      ShapeToString(saved[k].full.shape()), " ",
                      std::string(DTypeName(saved[k].full.dtype())), " ",
                      PlacementsText(saved[k].placements), " -> ",
                      PlacementsText(loaded[k].placements));
    }
    SCOPED_TRACE(description);

    const std::string dir = testing::TestDirectory("reshard");
    std::vector<CheckpointStats> save_stats(save_size);
    ExpectAllOk(testing::RunRanks(
                    save_size,
                    [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
                      DT_ASSIGN_OR_RETURN(
                          nn::StateDict state,
                          testing::DistributeCases(runtime, save_mesh, saved));
                      parallel::SaveOptions options;
                      options.chunk_bytes = chunk_bytes;
                      options.sync = false;
                      options.stats = &save_stats[runtime->rank()];
                      return parallel::SaveCheckpoint(dir, state, options);
                    }),
                "save");
    int64_t written = 0, file_bytes = 0;
    for (const CheckpointStats& s : save_stats) written += s.bytes_written;
    EXPECT_EQ(written, total_bytes);
    std::set<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      files.insert(entry.path().filename().string());
      if (entry.path().extension() == ".bin") file_bytes += entry.file_size();
    }
    EXPECT_EQ(file_bytes, total_bytes);
    EXPECT_EQ(files.count("metadata.json"), 1u);
    EXPECT_EQ(files.size(), static_cast<size_t>(save_size + 1));
    EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));

    ExpectAllOk(
        testing::RunRanks(
            load_size,
            [&](std::shared_ptr<Runtime> runtime) -> absl::Status {
              DT_ASSIGN_OR_RETURN(
                  nn::StateDict state,
                  testing::DistributeCases(runtime, load_mesh, loaded));
              CheckpointStats stats;
              parallel::LoadCheckpointOptions options;
              options.stats = &stats;
              DT_RETURN_IF_ERROR(parallel::LoadCheckpoint(dir, state, options));
              int64_t needed = 0, to_read = 0;
              for (size_t k = 0; k < saved.size(); ++k) {
                const DTensor& got = state.at(saved[k].key);
                DT_ASSIGN_OR_RETURN(bool same,
                                    testing::LocalMatches(got, saved[k].full));
                DT_RETURN_IF_ERROR(
                    Check(same, absl::StrCat(saved[k].key, " differs on rank ",
                                             runtime->rank())));
                const int64_t element_size = ElementSize(got.dtype());
                DT_ASSIGN_OR_RETURN(ShardBlock box, got.LocalBlock());
                needed += box.numel() * element_size;
                DT_ASSIGN_OR_RETURN(
                    DTensorSpec save_spec,
                    DTensorSpec::Create(save_mesh, saved[k].placements,
                                        saved[k].full.shape(), got.dtype(),
                                        saved[k].order));
                to_read += ChunkBytesToRead(DistinctBlocks(save_spec), box,
                                            element_size, chunk_bytes);
              }
              DT_RETURN_IF_ERROR(
                  Check(stats.bytes_needed == needed,
                        absl::StrCat("bytes needed ", stats.bytes_needed,
                                     ", expected ", needed)));
              return Check(stats.bytes_read == to_read,
                           absl::StrCat("bytes read ", stats.bytes_read,
                                        ", expected ", to_read));
            }),
        "load");
  }
}

}  // namespace
}  // namespace dtensor
