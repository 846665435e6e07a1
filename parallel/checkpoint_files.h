#ifndef DTENSOR_PARALLEL_CHECKPOINT_FILES_H_
#define DTENSOR_PARALLEL_CHECKPOINT_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtensor {
namespace parallel {

// The file-system steps of a checkpoint. Errors are Unavailable naming the
// path and the system's reason, unless stated otherwise.

// Makes `dir` an empty directory: removes what is there (a previous save's
// leftovers), creates it and its missing parents.
absl::Status MakeEmptyDirectory(const std::string& dir);

// Writes `text` to `path` (replacing it), flushed to stable storage when
// `sync`.
absl::Status WriteTextFile(const std::string& path, absl::string_view text,
                           bool sync);

// The contents of `path`; NotFound when it does not exist.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// Removes `path` and everything under it; no error when it does not exist.
absl::Status RemoveAll(const std::string& path);

// Puts the complete directory `fresh` in the place of `dir`: renames `dir`
// (if any) to `dir`.old, `fresh` to `dir`, then removes `dir`.old. Until the
// second rename `dir` is the old checkpoint; a crash between the renames
// leaves both directories complete. When `sync`, flushes `fresh` before and
// the parent directory after the renames.
absl::Status ReplaceDirectory(const std::string& fresh, const std::string& dir,
                              bool sync);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_FILES_H_
