#ifndef DTENSOR_PARALLEL_CHECKPOINT_BLOCK_IO_H_
#define DTENSOR_PARALLEL_CHECKPOINT_BLOCK_IO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/parallel/checkpoint_metadata.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace parallel {

// The box both `a` and `b` cover (global offsets); nullopt when it has no
// elements.
// Requires: boxes of equal rank (DT_DCHECK).
std::optional<ShardBlock> IntersectBoxes(const ShardBlock& a,
                                         const ShardBlock& b);

// Appends blocks to one data file, computing their chunk checksums.
class DataFileWriter {
 public:
  // Creates (or truncates) `dir`/`file`.
  // Errors: the file system's (naming the path).
  static absl::StatusOr<DataFileWriter> Open(const std::string& dir,
                                             std::string file);
  DataFileWriter(DataFileWriter&& other) noexcept;
  DataFileWriter& operator=(DataFileWriter&&) = delete;
  ~DataFileWriter();

  // Writes the `nbytes` bytes at `data` (the row-major elements of `box`)
  // and returns their record, with a checksum per `chunk_bytes`.
  // Requires: the file is open (Close not called); chunk_bytes > 0.
  // Errors: Unavailable for a failed write, naming the path.
  absl::StatusOr<StoredBlock> Append(const ShardBlock& box, const void* data,
                                     int64_t nbytes, int64_t chunk_bytes);
  // Flushes to stable storage when `sync`, and closes the file.
  // Requires: called once.
  // Errors: Unavailable for a failed sync or close, naming the path.
  absl::Status Close(bool sync);

  int64_t bytes_written() const { return size_; }

 private:
  DataFileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// The data files of one checkpoint, opened for reading on first use.
class DataFileReader {
 public:
  explicit DataFileReader(std::string dir) : dir_(std::move(dir)) {}
  DataFileReader(const DataFileReader&) = delete;
  DataFileReader& operator=(const DataFileReader&) = delete;
  ~DataFileReader();

  // Copies the elements of `stored` inside `target` into `target_data` (the
  // row-major elements of the box `target`, `element_size` bytes each). Reads
  // exactly the checksum chunks of `stored` that hold those elements, merged
  // into one read per contiguous run, and verifies each chunk it reads.
  // Requires: `target` has the rank of stored.box; chunk_bytes is the
  // checkpoint's; `target_data` holds target.numel() * element_size bytes.
  // Errors: NotFound for a missing file, DataLoss for a file too short or a
  // checksum mismatch (naming the file and chunk).
  absl::Status ReadOverlap(const StoredBlock& stored, int64_t element_size,
                           int64_t chunk_bytes, const ShardBlock& target,
                           void* target_data);

  // Bytes read from data files so far, and the bytes of the elements asked
  // for (the rest is the rounding out to whole chunks).
  int64_t bytes_read() const { return bytes_read_; }
  int64_t bytes_needed() const { return bytes_needed_; }

 private:
  absl::StatusOr<int> FileDescriptor(const std::string& file);
  // Reads chunks [first, last] of `stored` (a block of `stored_bytes`) into
  // `out` and verifies their checksums.
  absl::Status ReadChunks(const StoredBlock& stored, int64_t first,
                          int64_t last, int64_t stored_bytes,
                          int64_t chunk_bytes, char* out);
  // Reads `size` bytes at `offset` of `file` into `out`.
  absl::Status ReadExactly(const std::string& file, int64_t offset,
                           int64_t size, char* out);

  std::string dir_;
  absl::flat_hash_map<std::string, int> fds_;
  int64_t bytes_read_ = 0;
  int64_t bytes_needed_ = 0;
};

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_BLOCK_IO_H_
