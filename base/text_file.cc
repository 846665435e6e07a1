#include "base/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dtensor {
namespace {

absl::Status ErrnoFailed(const char* what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path + " does not exist");
    return ErrnoFailed("cannot open", path);
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = ErrnoFailed("cannot read", path);
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    text.append(buffer, n);
  }
  ::close(fd);
  return text;
}

}  // namespace dtensor
