#ifndef DTENSOR_BASE_TEXT_FILE_H_
#define DTENSOR_BASE_TEXT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace dtensor {

// The largest file each reader accepts, so that a wrong path (/dev/zero, a
// log, a data set) is refused at once instead of read for minutes. Stated in
// docs/reliability.md; far above what the real inputs need.
// A plan file (the shipped ones are under 2 KiB).
inline constexpr int64_t kMaxPlanFileBytes = int64_t{1} << 20;
// A model config (a few hundred bytes).
inline constexpr int64_t kMaxModelConfigBytes = int64_t{1} << 20;
// A checkpoint's metadata.json or a rank's index file (a few hundred bytes
// per block; 64 MiB is ~100,000s of blocks).
inline constexpr int64_t kMaxCheckpointMetadataBytes = int64_t{64} << 20;
// The training corpus of examples/train_llama (read whole into memory).
inline constexpr int64_t kMaxCorpusBytes = int64_t{256} << 20;

// The whole contents of the regular file at `path` (plan files, model
// configs, checkpoint metadata, corpora), at most `max_bytes` long. Errors
// name the path: NotFound when it does not exist; InvalidArgument when it is
// not a regular file (a directory, a device such as /dev/zero, a FIFO; never
// blocks on one) or is larger than `max_bytes` (naming the size and the
// limit); Unavailable when it cannot be opened or read (with the system's
// reason).
absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         int64_t max_bytes);

}  // namespace dtensor

#endif  // DTENSOR_BASE_TEXT_FILE_H_
