#include "dtensor/parallel/checkpoint_block_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/checkpoint_checksum.h"

namespace dtensor {
namespace parallel {
namespace {

std::string PathIn(const std::string& dir, const std::string& file) {
  return absl::StrCat(dir, "/", file);
}

absl::Status IoError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Calls fn(stored_element, target_element, length) for every innermost row of
// the box `inside` (contained in both `stored` and `target`), in row-major
// order: the row's first element as a row-major index into each box, and its
// length. A 0-d box is one row of one element.
template <typename Fn>
void ForEachRow(const ShardBlock& inside, const ShardBlock& stored,
                const ShardBlock& target, Fn fn) {
  const size_t rank = inside.shape.size();
  if (rank == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{1});
    return;
  }
  const Strides stored_strides = ContiguousStrides(stored.shape);
  const Strides target_strides = ContiguousStrides(target.shape);
  std::vector<int64_t> index(rank, 0);  // within `inside`; last stays 0
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t global = inside.offset[d] + index[d];
      s += (global - stored.offset[d]) * stored_strides[d];
      t += (global - target.offset[d]) * target_strides[d];
    }
    fn(s, t, inside.shape[rank - 1]);
    int64_t d = static_cast<int64_t>(rank) - 2;
    for (; d >= 0; --d) {
      if (++index[d] < inside.shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// The row-major index within `box` of the first element of `inside` (a box
// within it) when the elements of `inside` are contiguous there: every dim
// outside some dim k has size 1 in `inside` and every dim inside k is whole.
std::optional<int64_t> ContiguousStart(const ShardBlock& inside,
                                       const ShardBlock& box) {
  const size_t rank = inside.shape.size();
  size_t k = rank;
  while (k > 0 && inside.shape[k - 1] == box.shape[k - 1]) --k;
  // Dims k.. are whole; dim k - 1 may be partial; dims before it must be 1.
  for (size_t d = 0; d + 1 < k; ++d) {
    if (inside.shape[d] != 1) return std::nullopt;
  }
  int64_t start = 0;
  for (size_t d = 0; d < rank; ++d) {
    start = start * box.shape[d] + (inside.offset[d] - box.offset[d]);
  }
  return start;
}

// A run of whole chunks [first, last] of a stored block, read into the
// packed buffer at `buffer_offset`.
struct ChunkRun {
  int64_t first = 0;
  int64_t last = 0;
  int64_t buffer_offset = 0;
};

}  // namespace

std::optional<ShardBlock> IntersectBoxes(const ShardBlock& a,
                                         const ShardBlock& b) {
  DT_DCHECK(a.shape.size() == b.shape.size() &&
            a.offset.size() == b.offset.size());
  ShardBlock box;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t begin = std::max(a.offset[d], b.offset[d]);
    const int64_t end =
        std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    if (end <= begin) return std::nullopt;
    box.offset.push_back(begin);
    box.shape.push_back(end - begin);
  }
  return box;
}

absl::StatusOr<DataFileWriter> DataFileWriter::Open(const std::string& dir,
                                                    std::string file) {
  std::string path = PathIn(dir, file);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return IoError("cannot create", path);
  return DataFileWriter(std::move(path), fd);
}

DataFileWriter::DataFileWriter(DataFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_) {}

DataFileWriter::~DataFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<StoredBlock> DataFileWriter::Append(const ShardBlock& box,
                                                   const void* data,
                                                   int64_t nbytes,
                                                   int64_t chunk_bytes) {
  DT_DCHECK(fd_ >= 0 && chunk_bytes > 0);
  StoredBlock block;
  block.file = path_.substr(path_.rfind('/') + 1);
  block.file_offset = size_;
  block.box = box;
  const char* bytes = static_cast<const char*>(data);
  for (int64_t begin = 0; begin < nbytes; begin += chunk_bytes) {
    block.chunk_crc32c.push_back(
        Crc32c(bytes + begin, std::min(chunk_bytes, nbytes - begin)));
  }
  for (int64_t done = 0; done < nbytes;) {
    const ssize_t n = ::write(fd_, bytes + done, nbytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError("cannot write", path_);
    done += n;
  }
  size_ += nbytes;
  return block;
}

absl::Status DataFileWriter::Close(bool sync) {
  if (sync && ::fsync(fd_) != 0) return IoError("cannot sync", path_);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return IoError("cannot close", path_);
  return absl::OkStatus();
}

DataFileReader::~DataFileReader() {
  for (const auto& [file, fd] : fds_) ::close(fd);
}

absl::StatusOr<int> DataFileReader::FileDescriptor(const std::string& file) {
  auto it = fds_.find(file);
  if (it != fds_.end()) return it->second;
  const std::string path = PathIn(dir_, file);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("data file ", path, " is missing"));
    }
    return IoError("cannot open", path);
  }
  fds_.emplace(file, fd);
  return fd;
}

absl::Status DataFileReader::ReadExactly(const std::string& file,
                                         int64_t offset, int64_t size,
                                         char* out) {
  DT_ASSIGN_OR_RETURN(int fd, FileDescriptor(file));
  for (int64_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, out + done, size - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot read", PathIn(dir_, file));
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(
          "data file ", PathIn(dir_, file), " is truncated: it ends at byte ",
          offset + done, ", bytes up to ", offset + size, " are needed"));
    }
    done += n;
  }
  bytes_read_ += size;
  return absl::OkStatus();
}

absl::Status DataFileReader::ReadChunks(const StoredBlock& stored,
                                        int64_t first, int64_t last,
                                        int64_t stored_bytes,
                                        int64_t chunk_bytes, char* out) {
  auto chunk_end = [&](int64_t chunk) {
    return std::min((chunk + 1) * chunk_bytes, stored_bytes);
  };
  const int64_t begin = first * chunk_bytes;
  DT_RETURN_IF_ERROR(ReadExactly(stored.file, stored.file_offset + begin,
                                 chunk_end(last) - begin, out));
  for (int64_t chunk = first; chunk <= last; ++chunk) {
    const int64_t offset = chunk * chunk_bytes;
    const uint32_t crc =
        Crc32c(out + offset - begin, chunk_end(chunk) - offset);
    if (crc != stored.chunk_crc32c[chunk]) {
      return absl::DataLossError(absl::StrFormat(
          "checksum mismatch in chunk %d (bytes [%d, %d) of the block at "
          "offset %d of data file %s): stored %08x, computed %08x",
          chunk, offset, chunk_end(chunk), stored.file_offset,
          PathIn(dir_, stored.file), stored.chunk_crc32c[chunk], crc));
    }
  }
  return absl::OkStatus();
}

absl::Status DataFileReader::ReadOverlap(const StoredBlock& stored,
                                         int64_t element_size,
                                         int64_t chunk_bytes,
                                         const ShardBlock& target,
                                         void* target_data) {
  const std::optional<ShardBlock> inside = IntersectBoxes(stored.box, target);
  if (!inside.has_value()) return absl::OkStatus();
  const int64_t stored_bytes = stored.box.numel() * element_size;
  const int64_t inside_bytes = inside->numel() * element_size;
  bytes_needed_ += inside_bytes;
  char* target_bytes = static_cast<char*>(target_data);

  // Fast path: one contiguous run in both boxes that starts and ends on
  // chunk boundaries is read straight into the target.
  const std::optional<int64_t> stored_start =
      ContiguousStart(*inside, stored.box);
  const std::optional<int64_t> target_start = ContiguousStart(*inside, target);
  if (stored_start.has_value() && target_start.has_value()) {
    const int64_t begin = *stored_start * element_size;
    const int64_t end = begin + inside_bytes;
    if (begin % chunk_bytes == 0 &&
        (end % chunk_bytes == 0 || end == stored_bytes)) {
      return ReadChunks(stored, begin / chunk_bytes, (end - 1) / chunk_bytes,
                        stored_bytes, chunk_bytes,
                        target_bytes + *target_start * element_size);
    }
  }

  // The chunks holding the rows, merged into runs (rows come in ascending
  // order, so each either extends the last run or starts a new one), read
  // into one packed buffer.
  std::vector<ChunkRun> runs;
  int64_t packed_bytes = 0;
  auto run_bytes = [&](const ChunkRun& run) {
    return std::min((run.last + 1) * chunk_bytes, stored_bytes) -
           run.first * chunk_bytes;
  };
  ForEachRow(
      *inside, stored.box, target, [&](int64_t s, int64_t, int64_t length) {
        const int64_t first = s * element_size / chunk_bytes;
        const int64_t last = ((s + length) * element_size - 1) / chunk_bytes;
        if (!runs.empty() && first <= runs.back().last + 1) {
          runs.back().last = std::max(runs.back().last, last);
          return;
        }
        if (!runs.empty()) packed_bytes += run_bytes(runs.back());
        runs.push_back({first, last, packed_bytes});
      });
  packed_bytes += run_bytes(runs.back());
  // Uninitialized: every byte is read before it is used.
  std::unique_ptr<char[]> packed(new char[packed_bytes]);
  for (const ChunkRun& run : runs) {
    DT_RETURN_IF_ERROR(ReadChunks(stored, run.first, run.last, stored_bytes,
                                  chunk_bytes,
                                  packed.get() + run.buffer_offset));
  }

  size_t run = 0;
  ForEachRow(
      *inside, stored.box, target, [&](int64_t s, int64_t t, int64_t length) {
        const int64_t begin = s * element_size;
        while (begin >= runs[run].first * chunk_bytes + run_bytes(runs[run])) {
          ++run;
        }
        const int64_t in_packed =
            runs[run].buffer_offset + begin - runs[run].first * chunk_bytes;
        std::memcpy(target_bytes + t * element_size, packed.get() + in_packed,
                    length * element_size);
      });
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
