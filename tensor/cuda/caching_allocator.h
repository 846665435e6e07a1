#ifndef DTENSOR_TENSOR_CUDA_CACHING_ALLOCATOR_H_
#define DTENSOR_TENSOR_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace dtensor::cuda {

// Byte counts of one caching allocator.
struct MemoryStats {
  // Bytes of the blocks handed out and not yet freed (rounded block sizes).
  int64_t allocated = 0;
  // Bytes obtained from the backing allocator and not yet returned to it
  // (allocated plus cached).
  int64_t reserved = 0;
  // The largest `allocated` since construction or ResetPeak().
  int64_t peak_allocated = 0;
  // Calls that reached the backing allocator, and those served from cache.
  int64_t backing_allocations = 0;
  int64_t cache_hits = 0;
};

// A caching allocator over a slow backing allocator (cudaMalloc / cudaFree in
// the CUDA backend; any pair of functions in tests). Requests are rounded up
// to a size bin (multiples of 512 bytes below 1 MiB, of 2 MiB above); a freed
// block goes back to the cache and serves a later request of the same bin, or
// of a bin at most twice smaller, so a training loop that repeats its
// allocations stops calling the backing allocator after its first step.
// When the backing allocator fails, the cache is emptied and the request
// retried once. Blocks are not split: the cache never hands out part of a
// block.
//
// Blocks are tagged with the stream they were allocated on and reused only on
// that stream, so a block freed while a kernel of its stream still reads it
// is not reused by another stream before that kernel ran (work on one stream
// runs in order). Thread-safe.
class CachingAllocator {
 public:
  using BackingAlloc = std::function<absl::StatusOr<void*>(size_t nbytes)>;
  using BackingFree = std::function<void(void* ptr)>;

  CachingAllocator(BackingAlloc alloc, BackingFree free);
  // Returns every block, cached or not, to the backing allocator.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The bin a request of `nbytes` is rounded up to (at least 512 bytes).
  static size_t RoundSize(size_t nbytes);

  // A block of at least `nbytes` for use on `stream`.
  absl::StatusOr<void*> Allocate(size_t nbytes, uintptr_t stream = 0);
  // Returns a block from Allocate to the cache; unknown pointers and blocks
  // already freed are ignored.
  void Free(void* ptr);
  // Returns the cached (free) blocks to the backing allocator.
  void EmptyCache();

  MemoryStats Stats() const;
  void ResetPeak();

 private:
  struct Block {
    size_t size;
    uintptr_t stream;
    bool in_use;
  };
  // Free blocks keyed by (stream, size).
  using FreeKey = std::pair<uintptr_t, size_t>;

  // Takes a cached block of bin `size` on `stream`, or nullptr.
  void* TakeCached(size_t size, uintptr_t stream);
  void EmptyCacheLocked();

  BackingAlloc backing_alloc_;
  BackingFree backing_free_;
  mutable std::mutex mu_;
  std::multimap<FreeKey, void*> free_blocks_;
  std::unordered_map<void*, Block> blocks_;  // Every live or cached block.
  MemoryStats stats_;
};

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_CACHING_ALLOCATOR_H_
