#include "dtensor/tensor/large_buffer_cache.h"

#include <sys/mman.h>

#include <cstdlib>

#include "dtensor/base/debug_check.h"

namespace dtensor {

LargeBufferCache& LargeBufferCache::Shared() {
  // 1 GiB of idle buffers at most; never destroyed, so buffers released
  // during static destruction stay valid to release.
  static LargeBufferCache* cache = new LargeBufferCache(size_t{1} << 30);
  return *cache;
}

LargeBufferCache::~LargeBufferCache() {
  MutexLock lock(&mu_);
  for (const auto& [bytes, buffer] : idle_) std::free(buffer);
}

void* LargeBufferCache::Allocate(size_t bytes) {
  DT_DCHECK(bytes % kMinBytes == 0);
  {
    MutexLock lock(&mu_);
    auto it = idle_.find(bytes);
    if (it != idle_.end()) {
      void* buffer = it->second;
      idle_.erase(it);
      idle_bytes_ -= bytes;
      return buffer;
    }
  }
  const bool huge = bytes >= kHugePageBytes;
  void* buffer = nullptr;
  // posix_memalign: `bytes` need not be a multiple of kHugePageBytes.
  if (posix_memalign(&buffer, huge ? kHugePageBytes : kMinBytes, bytes) != 0) {
    return nullptr;
  }
  if (huge) madvise(buffer, bytes, MADV_HUGEPAGE);  // Advice: may fail.
  return buffer;
}

void LargeBufferCache::Release(void* buffer, size_t bytes) {
  {
    MutexLock lock(&mu_);
    if (idle_bytes_ + bytes <= budget_bytes_) {
      idle_.emplace(bytes, buffer);
      idle_bytes_ += bytes;
      return;
    }
  }
  std::free(buffer);
}

size_t LargeBufferCache::idle_bytes() const {
  MutexLock lock(&mu_);
  return idle_bytes_;
}

}  // namespace dtensor
