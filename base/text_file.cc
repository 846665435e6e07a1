#include "dtensor/base/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
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

absl::Status TooLarge(const std::string& path, int64_t size,
                      int64_t max_bytes) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, " has ", size, " bytes; the limit is ", max_bytes, " bytes"));
}

// Closes the descriptor on every path out of ReadTextFile.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Checks that `fd` is a regular file of at most `max_bytes`; returns its
// size.
absl::StatusOr<int64_t> CheckedSize(int fd, const std::string& path,
                                    int64_t max_bytes) {
  struct stat info;
  if (::fstat(fd, &info) != 0) return ErrnoFailed("cannot stat", path);
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a regular file (",
        S_ISDIR(info.st_mode) ? "a directory" : "a device, FIFO or socket",
        ")"));
  }
  if (info.st_size > max_bytes) return TooLarge(path, info.st_size, max_bytes);
  return static_cast<int64_t>(info.st_size);
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below. Regular files ignore the flag.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path + " does not exist");
    return ErrnoFailed("cannot open", path);
  }
  absl::StatusOr<int64_t> size = CheckedSize(fd.get(), path, max_bytes);
  if (!size.ok()) return size.status();
  std::string text;
  text.reserve(*size);
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoFailed("cannot read", path);
    if (n == 0) break;
    text.append(buffer, n);
    // The file may grow while it is read.
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      return TooLarge(path, static_cast<int64_t>(text.size()), max_bytes);
    }
  }
  return text;
}

}  // namespace dtensor
