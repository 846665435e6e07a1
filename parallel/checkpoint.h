#ifndef DTENSOR_PARALLEL_CHECKPOINT_H_
#define DTENSOR_PARALLEL_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "nn/state_dict.h"

namespace dtensor {
namespace parallel {

// Sharded checkpoints of DTensors (model parameters, optimizer state): every
// rank writes only its own blocks, and a load reshards to any layout on any
// mesh. See docs/checkpoint.md for the directory format.

// What one rank's SaveCheckpoint or LoadCheckpoint moved (tensor data only,
// not the metadata file).
struct CheckpointStats {
  // Save: the blocks this rank wrote and their bytes.
  int64_t blocks_written = 0;
  int64_t bytes_written = 0;
  // Load: the bytes read from data files, and the bytes of the elements this
  // rank's shards needed (reads round out to whole checksum chunks).
  int64_t bytes_read = 0;
  int64_t bytes_needed = 0;
};

struct SaveOptions {
  // Every stored block has one CRC-32C per chunk of this many bytes; a load
  // reads and verifies whole chunks, so smaller chunks read less around the
  // elements needed, at the price of a larger metadata file.
  int64_t chunk_bytes = int64_t{1} << 20;
  // Flush files and directories to stable storage before the commit.
  bool sync = true;
  // Test hook, simulating a crash: called before this rank writes each of its
  // blocks with the number it has written so far; an error stops its writes
  // there and fails the save on every rank.
  std::function<absl::Status(int64_t blocks_written)> before_block;
  // If set, receives this rank's counts.
  CheckpointStats* stats = nullptr;
};

struct LoadCheckpointOptions {
  // If set, receives this rank's counts.
  CheckpointStats* stats = nullptr;
};

// Saves `state` to directory `dir`. SPMD: every rank of the world (its
// ProcessGroups) calls it with the DTensors it holds; the keys may differ
// between ranks (a DTensor lives on the ranks of its mesh), but DTensors under
// one key must have one global shape, dtype and layout. Each block of each
// tensor is written once, by the lowest rank holding it; Partial mesh dims
// are first reduced (redistributed to Replicate: a collective on the
// DTensor's mesh). Data files and a metadata.json are written into
// `dir`.tmp, which replaces `dir` only once every rank has succeeded
// (rename `dir` -> `dir`.old, `dir`.tmp -> `dir`, remove `dir`.old), so a
// crash or error leaves the last good checkpoint in place. The file system
// must be shared by the ranks.
//
// Errors (the same outcome on every rank: a rank whose own step succeeded
// returns Aborted naming the rank that failed): an empty state, an undefined
// DTensor (naming the key), a metadata-only runtime, DTensors of different
// ProcessGroups, file-system errors (naming the path), the before_block hook.
absl::Status SaveCheckpoint(const std::string& dir, const nn::StateDict& state,
                            const SaveOptions& options = {});

// Loads the checkpoint in `dir` into the DTensors of `state` in place: each
// DTensor's local shard is overwritten (so every copy of it, module slots and
// optimizer state included, sees the values), whatever its mesh and layout,
// which need not be those it was saved with. SPMD like SaveCheckpoint. Each
// rank reads only the checksum chunks of the stored blocks that overlap its
// shards and verifies every chunk it reads. Keys of the checkpoint missing
// from `state` are ignored.
//
// Errors, after which no DTensor has changed on any rank: a key of `state`
// missing from the checkpoint, a wrong global shape or dtype, or a Partial
// target layout (InvalidArgument naming the key); no metadata.json
// (NotFound); a truncated or invalid metadata.json, a checksum mismatch or a
// short data file (DataLoss naming the tensor, block and file); a missing
// data file (NotFound naming it); a metadata-only runtime.
absl::Status LoadCheckpoint(const std::string& dir, const nn::StateDict& state,
                            const LoadCheckpointOptions& options = {});

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_H_
