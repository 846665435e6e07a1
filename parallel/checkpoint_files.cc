#include "dtensor/parallel/checkpoint_files.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc 2.28+, _GNU_SOURCE)
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace parallel {
namespace {

namespace fs = std::filesystem;

absl::Status Failed(absl::string_view what, const std::string& path,
                    const std::string& reason) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", reason));
}

absl::Status ErrnoFailed(absl::string_view what, const std::string& path) {
  return Failed(what, path, std::strerror(errno));
}

absl::Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return ErrnoFailed("cannot open", path);
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) return ErrnoFailed("cannot sync", path);
  return absl::OkStatus();
}

absl::Status Rename(const std::string& from, const std::string& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (error)
    return Failed("cannot rename", from + " to " + to, error.message());
  return absl::OkStatus();
}

absl::StatusOr<bool> Exists(const std::string& path) {
  std::error_code error;
  const bool exists = fs::exists(path, error);
  if (error) return Failed("cannot inspect", path, error.message());
  return exists;
}

}  // namespace

absl::Status MakeEmptyDirectory(const std::string& dir) {
  DT_RETURN_IF_ERROR(RemoveAll(dir));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return Failed("cannot create directory", dir, error.message());
  return absl::OkStatus();
}

absl::Status WriteTextFile(const std::string& path, absl::string_view text,
                           bool sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return ErrnoFailed("cannot create", path);
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = ErrnoFailed("cannot write", path);
      ::close(fd);
      return status;
    }
    done += n;
  }
  if (sync && ::fsync(fd) != 0) {
    absl::Status status = ErrnoFailed("cannot sync", path);
    ::close(fd);
    return status;
  }
  if (::close(fd) != 0) return ErrnoFailed("cannot close", path);
  return absl::OkStatus();
}

absl::Status RemoveAll(const std::string& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) return Failed("cannot remove", path, error.message());
  return absl::OkStatus();
}

absl::Status ReplaceDirectory(const std::string& fresh, const std::string& dir,
                              bool sync) {
  const std::string old = dir + ".old";
  // The entries of `fresh` (its files) are durable before it is renamed.
  if (sync) DT_RETURN_IF_ERROR(SyncPath(fresh));
  DT_ASSIGN_OR_RETURN(const bool had_dir, Exists(dir));
  // What holds the previous checkpoint once `fresh` is `dir`.
  std::string previous = fresh;
  if (!had_dir) {
    DT_RETURN_IF_ERROR(Rename(fresh, dir));
  } else if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, dir.c_str(),
                         RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) {
      return ErrnoFailed("cannot exchange", fresh + " and " + dir);
    }
    DT_RETURN_IF_ERROR(RemoveAll(old));
    DT_RETURN_IF_ERROR(Rename(dir, old));
    DT_RETURN_IF_ERROR(Rename(fresh, dir));
    previous = old;
  }
  if (sync) {
    std::error_code error;
    std::string parent = fs::absolute(dir, error).parent_path().string();
    if (error) return Failed("cannot resolve", dir, error.message());
    DT_RETURN_IF_ERROR(SyncPath(parent));
  }
  if (had_dir) DT_RETURN_IF_ERROR(RemoveAll(previous));
  // A stale `dir`.old of an earlier fallback commit.
  return RemoveAll(old);
}

absl::StatusOr<std::string> CommittedDirectory(const std::string& dir) {
  DT_ASSIGN_OR_RETURN(const bool has_dir, Exists(dir));
  if (has_dir) return dir;
  const std::string old = dir + ".old";
  DT_ASSIGN_OR_RETURN(const bool has_old, Exists(old));
  return has_old ? old : dir;
}

}  // namespace parallel
}  // namespace dtensor
