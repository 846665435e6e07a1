#ifndef DTENSOR_PARALLEL_CHECKPOINT_FILES_H_
#define DTENSOR_PARALLEL_CHECKPOINT_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtensor {
namespace parallel {

// The file-system steps of a checkpoint. Each function's Errors: line
// lists its failures; every one is Unavailable naming the path and the
// system's reason (errno text), unless stated otherwise.

// Makes `dir` an empty directory: removes what is there (a previous save's
// leftovers), creates it and its missing parents.
// Errors: a removal or creation that fails.
absl::Status MakeEmptyDirectory(const std::string& dir);

// Writes `text` to `path` (replacing it), flushed to stable storage when
// `sync`. The file's directory must exist.
// Errors: an open, write, sync or close that fails.
absl::Status WriteTextFile(const std::string& path, absl::string_view text,
                           bool sync);

// Removes `path` and everything under it.
// Errors: a removal that fails (not a `path` that does not exist: OK).
absl::Status RemoveAll(const std::string& path);

// Puts the complete directory `fresh` in the place of `dir`, then removes
// the previous `dir` (and a stale `dir`.old). When `dir` exists the two are
// swapped in one step (renameat2 RENAME_EXCHANGE), so `dir` is always a
// complete checkpoint, the old one or the new one; a crash after the swap
// leaves the old checkpoint as `fresh`, which the next save clears. Where
// the file system cannot swap (EINVAL or ENOSYS) it falls back to renaming
// `dir` to `dir`.old and `fresh` to `dir`: a crash between those renames
// leaves no `dir` but a complete `dir`.old, which CommittedDirectory finds.
// When `sync`, flushes `fresh` before and the parent directory after the
// renames.
// Requires: `fresh` is a complete checkpoint, in the same file system as
// `dir` (renames do not cross file systems).
// Errors: a rename, removal or sync that fails; `dir` then still names a
// complete checkpoint (or CommittedDirectory finds it).
absl::Status ReplaceDirectory(const std::string& fresh, const std::string& dir,
                              bool sync);

// The directory that holds the last committed checkpoint of `dir`: `dir`
// itself, or `dir`.old when only that exists (a crash between the two
// renames of ReplaceDirectory's fallback). While `dir` is missing, `dir`.old
// is only ever a complete checkpoint: it is created by renaming a complete
// `dir` and removed only while a `dir` exists. When neither exists, `dir`
// (whose reading then reports it missing).
// Errors: a failing stat of either path other than "does not exist".
absl::StatusOr<std::string> CommittedDirectory(const std::string& dir);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_FILES_H_
