#ifndef DTENSOR_TENSOR_LARGE_BUFFER_CACHE_H_
#define DTENSOR_TENSOR_LARGE_BUFFER_CACHE_H_

#include <cstddef>
#include <map>

#include "absl/base/thread_annotations.h"
#include "dtensor/base/mutex.h"

namespace dtensor {

// Keeps released large CPU buffers for reuse by the next allocation of the
// same size, up to a byte budget. Buffers of kHugePageBytes or more are
// aligned to it and huge-page advised; smaller ones are kMinBytes-aligned.
//
// Why: every op allocates its result, and a fresh buffer costs a page fault
// per page on first touch, which caps elementwise kernels far below memory
// bandwidth. Buffers of tens of MB come straight from mmap; those of a few
// hundred KB from malloc's heaps, which return their free tops to the system
// as a step's activations are freed and fault them in again next step (in a
// 2-rank tensor-parallel training step of a small model, thousands of faults
// per step). Training reallocates the same sizes every step, so exact-size
// reuse serves almost every such allocation. Thread-safe.
class LargeBufferCache {
 public:
  // Buffers of at least this many bytes go through the cache.
  static constexpr size_t kMinBytes = size_t{64} << 10;
  // Buffers of at least this many bytes are huge-page aligned and advised.
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  // The process-wide cache, holding at most `budget_bytes` of idle buffers.
  static LargeBufferCache& Shared();
  explicit LargeBufferCache(size_t budget_bytes)
      : budget_bytes_(budget_bytes) {}
  ~LargeBufferCache();

  // A buffer of `bytes`, reused or new; null when out of memory.
  // Requires: `bytes` is a multiple of kMinBytes (DT_DCHECK).
  void* Allocate(size_t bytes);
  // Takes back a buffer: kept when the budget allows, freed otherwise.
  // Requires: `buffer` came from Allocate(bytes) of this cache.
  void Release(void* buffer, size_t bytes);

  size_t idle_bytes() const;
  // The most idle bytes the cache keeps.
  size_t budget_bytes() const { return budget_bytes_; }

 private:
  const size_t budget_bytes_;
  mutable Mutex mu_;
  std::multimap<size_t, void*> idle_ ABSL_GUARDED_BY(mu_);
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_LARGE_BUFFER_CACHE_H_
