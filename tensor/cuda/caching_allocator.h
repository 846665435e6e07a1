#ifndef DTENSOR_TENSOR_CUDA_CACHING_ALLOCATOR_H_
#define DTENSOR_TENSOR_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
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
// runs in order).
//
// Private pools serve CUDA graph capture (dtensor/tensor/cuda_graph.h): a
// captured graph writes the same addresses at every replay, so the blocks it
// uses must not serve anything else while the graph lives. While a pool is
// active on a stream, Allocate on that stream takes the pool's free blocks
// (then the stream's cached blocks, which join the pool, then the backing
// allocator, the new block in the pool). A pool block, once freed, goes back
// to its pool's free list only, during the capture (where it is reused in
// order) and after it. A block made before the capture and freed during it
// is retired to the pool unused: every replay may read what it held before
// the capture. ReleasePool (when the graph is destroyed) puts the pool's
// free and retired blocks back in the shared cache and makes its blocks
// still in use ordinary ones. Thread-safe.
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

  // A private pool's id (never 0, which stands for the shared cache).
  using PoolId = uint64_t;
  // Makes a pool and makes it active on `stream` (above). One pool at a
  // time: a block of a live pool freed during another pool's capture would
  // go back to its own pool, and to the shared cache when that pool is
  // released, while the other graph still uses it.
  // Errors: FailedPrecondition while a pool begun earlier is not released
  // yet (naming it).
  absl::StatusOr<PoolId> BeginPool(uintptr_t stream);
  // Ends the active pool of `stream` (if any): allocations on the stream are
  // served from the shared cache again; the pool's blocks stay its own.
  void EndPool(uintptr_t stream);
  // Returns pool `pool`'s free blocks to the shared cache and makes its
  // blocks in use ordinary (freed to the shared cache). Requires: the pool
  // is not active and no work that uses its blocks will be submitted again
  // (the graph is destroyed); work already submitted is ordered before any
  // reuse as for any freed block. Unknown ids are ignored.
  void ReleasePool(PoolId pool);
  // Bytes of the blocks of `pool`, in use or free (tests, diagnostics).
  int64_t PoolBytes(PoolId pool) const;

 private:
  struct Block {
    size_t size;
    uintptr_t stream;
    bool in_use;
    PoolId pool = 0;  // 0: the shared cache.
    // Freed during its pool's capture after being made before it: kept out
    // of every free list until the pool is released.
    bool retired = false;
  };
  // Free blocks keyed by (pool, stream, size).
  using FreeKey = std::tuple<PoolId, uintptr_t, size_t>;

  // Takes a free block of bin `size` on `stream` in `pool`, or nullptr.
  void* TakeCached(size_t size, uintptr_t stream, PoolId pool);
  // The active pool of `stream`, or 0.
  PoolId ActivePool(uintptr_t stream) const;
  void EmptyCacheLocked();

  BackingAlloc backing_alloc_;
  BackingFree backing_free_;
  mutable std::mutex mu_;
  std::multimap<FreeKey, void*> free_blocks_;
  std::unordered_map<void*, Block> blocks_;  // Every live or cached block.
  // The one pool begun and not released yet (0: none), and while it is
  // active (BeginPool to EndPool), the stream it serves.
  PoolId live_pool_ = 0;
  bool pool_active_ = false;
  uintptr_t pool_stream_ = 0;
  PoolId next_pool_ = 1;
  MemoryStats stats_;
};

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_CACHING_ALLOCATOR_H_
