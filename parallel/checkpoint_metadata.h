#ifndef DTENSOR_PARALLEL_CHECKPOINT_METADATA_H_
#define DTENSOR_PARALLEL_CHECKPOINT_METADATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace parallel {

// One block of a tensor as a checkpoint stores it: the global box it holds,
// its bytes (row-major over the box, native little-endian) at `file_offset`
// of data file `file`, and the CRC-32C of every chunk of those bytes (chunk
// i covers bytes [i * chunk_bytes, (i + 1) * chunk_bytes) of the block, the
// last one shorter).
struct StoredBlock {
  std::string file;
  int64_t file_offset = 0;
  ShardBlock box;
  std::vector<uint32_t> chunk_crc32c;
};

// One tensor of a checkpoint: its global shape and dtype, the sharding it was
// saved from (for people; loading uses the blocks' boxes only) and its
// blocks, which tile the tensor without overlap.
struct StoredTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<int64_t> mesh_shape;
  std::string sharding;
  std::vector<StoredBlock> blocks;
};

// The contents of a checkpoint's metadata.json (and of the per-rank index
// files a save merges into it).
struct CheckpointMetadata {
  int64_t chunk_bytes = 0;
  absl::btree_map<std::string, StoredTensor> tensors;
};

// "shape [3, 2] at [5, 0]", as operator<< writes a ShardBlock.
std::string BoxText(const ShardBlock& box);

// The number of checksum chunks of a block of `nbytes` bytes (0 for none).
// Requires: nbytes >= 0 and chunk_bytes > 0 (ParseMetadata rejects other
//   chunk sizes; debug-checked).
int64_t ChunkCount(int64_t nbytes, int64_t chunk_bytes);

// `metadata` as one line of compact JSON (docs/checkpoint.md gives the
// format); ParseMetadata reads it back to an equal value.
std::string MetadataToJson(const CheckpointMetadata& metadata);

// What the blocks of each tensor of a document must cover.
enum class BlockCoverage {
  // metadata.json: the blocks tile the tensor, every element once.
  kWhole,
  // A rank's index file: the blocks it wrote, disjoint.
  kPart,
};

// Parses and validates JSON written by MetadataToJson.
// Errors: DataLoss naming the field (and the tensor) at fault: invalid or
// truncated JSON, a
// missing or mistyped field, an unknown dtype, a tensor of more than 2^62
// bytes, a block outside its tensor or of another rank, a checksum count that
// does not fit the block size, two overlapping blocks (naming both) or, for
// kWhole, blocks that leave elements uncovered.
absl::StatusOr<CheckpointMetadata> ParseMetadata(
    absl::string_view text, BlockCoverage coverage = BlockCoverage::kWhole);

// Adds the tensors and blocks of `piece` to `into`; the blocks of a tensor
// both hold are concatenated (overlaps are CheckCoverage's to find).
// Errors: InvalidArgument for chunk sizes that differ, or for a tensor both
// hold with another dtype, shape, mesh shape or sharding (naming its key);
// `into` may then hold part of `piece`.
absl::Status MergeMetadata(const CheckpointMetadata& piece,
                           CheckpointMetadata& into);

// Checks that every tensor's blocks tile it: no two overlap, and together
// they hold all its elements.
// Errors: Internal (a save that wrote a wrong set of blocks) naming the
// first tensor (and blocks) at fault.
absl::Status CheckCoverage(const CheckpointMetadata& metadata);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_METADATA_H_
