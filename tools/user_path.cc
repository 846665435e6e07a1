#include "tools/user_path.h"

#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace dtensor {

std::string UserPath(const std::string& path) {
  const char* user_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  struct stat info;
  if (path.empty() || path[0] == '/' || user_dir == nullptr ||
      stat(path.c_str(), &info) == 0) {
    return path;
  }
  return absl::StrCat(user_dir, "/", path);
}

}  // namespace dtensor
