#ifndef DTENSOR_BASE_TEXT_FILE_H_
#define DTENSOR_BASE_TEXT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace dtensor {

// The whole contents of the file at `path` (plan files, model configs,
// checkpoint metadata, corpora). Errors name the path: NotFound when it does
// not exist, Unavailable when it cannot be opened or read (with the system's
// reason).
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace dtensor

#endif  // DTENSOR_BASE_TEXT_FILE_H_
