#ifndef DTENSOR_PARALLEL_CHECKPOINT_H_
#define DTENSOR_PARALLEL_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "dtensor/nn/state_dict.h"

namespace dtensor {

class ProcessGroups;

namespace parallel {

// Sharded checkpoints of DTensors (model parameters, optimizer state): every
// rank writes only its own blocks, and a load reshards to any sharding on any
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
  // Test hook, injecting a failure between blocks: called before this rank
  // writes each of its blocks with the number it has written so far; an
  // error stops its writes there and fails the save on every rank. It
  // simulates a rank that fails, not one that dies: see docs/checkpoint.md
  // for what a process that dies mid-save does to its peers.
  std::function<absl::Status(int64_t blocks_written)> before_block;
  // If set, receives this rank's counts.
  CheckpointStats* stats = nullptr;
  // The world of the ranks that call; unset means the ProcessGroups of the
  // state's first DTensor that has a runtime with data. Set it on a rank
  // whose state may hold no such DTensor (empty, undefined, metadata-only):
  // without it that rank cannot reach its peers and returns at once.
  ProcessGroups* groups = nullptr;
};

struct LoadCheckpointOptions {
  // If set, receives this rank's counts.
  CheckpointStats* stats = nullptr;
  // As SaveOptions::groups.
  ProcessGroups* groups = nullptr;
};

// Saves `state` to directory `dir`. SPMD: every rank of the world (its
// ProcessGroups) calls it with the DTensors it holds; the keys may differ
// between ranks (a DTensor lives on the ranks of its mesh, and a rank may
// hold none: then set SaveOptions::groups), but DTensors under one key must
// have one global shape, dtype and sharding. Each block of each tensor is
// written once, by the lowest rank holding it; Partial mesh dims are first
// reduced (redistributed to Replicate: a collective on the DTensor's mesh,
// started only once every rank has passed its own checks). Data files and a
// metadata.json are written into `dir`.tmp, which replaces `dir` only once
// every rank has succeeded, in one atomic swap where the file system allows
// (see ReplaceDirectory in checkpoint_files.h), so a crash or error leaves
// the last good checkpoint loadable. On an error `dir`.tmp is removed. The
// file system must be shared by the ranks.
//
// Errors: the same outcome on every rank (a rank whose own step succeeded
// returns Aborted naming the rank that failed), for an empty state without
// SaveOptions::groups, an undefined DTensor (naming the key), a
// metadata-only runtime, DTensors of different ProcessGroups, a failed
// Partial reduction, states whose blocks do not tile a tensor (Internal),
// file-system errors (naming the path), the before_block hook. A rank that
// finds no ProcessGroups (no groups option, and no DTensor with data)
// returns its error at once: its peers then fail in their first collective
// (Unavailable once it exits, else at the collective deadline).
absl::Status SaveCheckpoint(const std::string& dir, const nn::StateDict& state,
                            const SaveOptions& options = {});

// Loads the checkpoint in `dir` into the DTensors of `state` in place: each
// DTensor's local shard is overwritten (so every copy of it, module slots and
// optimizer state included, sees the values), whatever its mesh and sharding,
// which need not be those it was saved with. SPMD like SaveCheckpoint. Each
// rank reads only the checksum chunks of the stored blocks that overlap its
// shards and verifies every chunk it reads. Keys of the checkpoint missing
// from `state` are ignored. When `dir` is missing but `dir`.old exists (a
// crash inside a commit on a file system without atomic swaps), `dir`.old,
// the previous complete checkpoint, is loaded.
//
// Every rank reads and checks all of its shards into staging tensors, then
// the ranks agree; only then are the staged values copied into the local
// shards. Errors, after which no DTensor has changed on any rank: a key of
// `state` missing from the checkpoint, a wrong global shape or dtype, or a
// Partial target sharding (InvalidArgument naming the key); a non-contiguous
// local shard on an accelerator (FailedPrecondition); no metadata.json
// (NotFound); a truncated or invalid metadata.json, a checksum mismatch or a
// short data file (DataLoss naming the tensor, block and file); a missing
// data file (NotFound naming it); a metadata-only runtime; the state errors
// of SaveCheckpoint. The copies after the agreement cannot fail for CPU
// shards. For a shard on an accelerator the copy stages through host memory
// and a host-to-device transfer, which fail only on a device fault or when
// the host is out of memory; that rank then returns the error with its
// DTensors partly loaded while its peers return OK.
absl::Status LoadCheckpoint(const std::string& dir, const nn::StateDict& state,
                            const LoadCheckpointOptions& options = {});

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_H_
