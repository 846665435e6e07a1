#include "dtensor/tensor/cuda/caching_allocator.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dtensor::cuda {
namespace {

constexpr size_t kSmallUnit = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeUnit = size_t{2} << 20;

size_t RoundUp(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }

}  // namespace

CachingAllocator::CachingAllocator(BackingAlloc alloc, BackingFree free)
    : backing_alloc_(std::move(alloc)), backing_free_(std::move(free)) {}

CachingAllocator::~CachingAllocator() {
  for (const auto& [ptr, block] : blocks_) backing_free_(ptr);
}

size_t CachingAllocator::RoundSize(size_t nbytes) {
  if (nbytes <= kLargeThreshold) {
    return RoundUp(std::max<size_t>(nbytes, 1), kSmallUnit);
  }
  return RoundUp(nbytes, kLargeUnit);
}

void* CachingAllocator::TakeCached(size_t size, uintptr_t stream, PoolId pool) {
  // The smallest free block of the pool and stream that fits and wastes at
  // most half.
  auto it = free_blocks_.lower_bound(FreeKey{pool, stream, size});
  if (it == free_blocks_.end() || std::get<0>(it->first) != pool ||
      std::get<1>(it->first) != stream || std::get<2>(it->first) > 2 * size) {
    return nullptr;
  }
  void* ptr = it->second;
  free_blocks_.erase(it);
  return ptr;
}

CachingAllocator::PoolId CachingAllocator::ActivePool(uintptr_t stream) const {
  return pool_active_ && stream == pool_stream_ ? live_pool_ : 0;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t nbytes,
                                                 uintptr_t stream) {
  const size_t size = RoundSize(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  const PoolId pool = ActivePool(stream);
  void* ptr = TakeCached(size, stream, pool);
  if (ptr == nullptr && pool != 0) {
    // A block of the shared cache joins the pool: its last use was submitted
    // before the capture, so the stream orders it before every replay.
    ptr = TakeCached(size, stream, 0);
    if (ptr != nullptr) blocks_[ptr].pool = pool;
  }
  if (ptr != nullptr) {
    ++stats_.cache_hits;
  } else {
    absl::StatusOr<void*> fresh = backing_alloc_(size);
    if (!fresh.ok()) {
      // While a stream is captured, returning memory to the backing
      // allocator (cudaFree, which waits for the device) is not allowed.
      if (pool_active_) return fresh.status();
      EmptyCacheLocked();
      fresh = backing_alloc_(size);
      if (!fresh.ok()) return fresh.status();
    }
    ptr = *fresh;
    blocks_[ptr] = Block{size, stream, false, pool};
    stats_.reserved += static_cast<int64_t>(size);
    ++stats_.backing_allocations;
  }
  Block& block = blocks_[ptr];
  block.in_use = true;
  stats_.allocated += static_cast<int64_t>(block.size);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return ptr;
}

void CachingAllocator::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(ptr);
  if (it == blocks_.end() || !it->second.in_use) return;
  Block& block = it->second;
  block.in_use = false;
  stats_.allocated -= static_cast<int64_t>(block.size);
  if (block.pool == 0) {
    // Made before the capture that frees it: every replay may read what it
    // held before the capture, so no one may reuse it while the graph lives.
    block.pool = ActivePool(block.stream);
    if (block.pool != 0) {
      block.retired = true;
      return;
    }
  }
  free_blocks_.emplace(FreeKey{block.pool, block.stream, block.size}, ptr);
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyCacheLocked();
}

void CachingAllocator::EmptyCacheLocked() {
  // Pools' free blocks stay: their graphs write them at every replay.
  const auto shared_end = free_blocks_.lower_bound(FreeKey{1, 0, 0});
  for (auto it = free_blocks_.begin(); it != shared_end; ++it) {
    backing_free_(it->second);
    blocks_.erase(it->second);
    stats_.reserved -= static_cast<int64_t>(std::get<2>(it->first));
  }
  free_blocks_.erase(free_blocks_.begin(), shared_end);
}

absl::StatusOr<CachingAllocator::PoolId> CachingAllocator::BeginPool(
    uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_pool_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CachingAllocator: private pool ", live_pool_,
        " is not released yet (one CUDA graph's pool at a time); stream 0x",
        absl::Hex(stream), " cannot begin another"));
  }
  const PoolId pool = next_pool_++;
  live_pool_ = pool;
  pool_active_ = true;
  pool_stream_ = stream;
  return pool;
}

void CachingAllocator::EndPool(uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pool_active_ && stream == pool_stream_) pool_active_ = false;
}

void CachingAllocator::ReleasePool(PoolId pool) {
  if (pool == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (pool == live_pool_) {
    live_pool_ = 0;
    pool_active_ = false;
  }
  const auto begin = free_blocks_.lower_bound(FreeKey{pool, 0, 0});
  const auto end = free_blocks_.lower_bound(FreeKey{pool + 1, 0, 0});
  std::vector<std::pair<FreeKey, void*>> freed(begin, end);
  free_blocks_.erase(begin, end);
  for (auto& [key, ptr] : freed) {
    free_blocks_.emplace(FreeKey{0, std::get<1>(key), std::get<2>(key)}, ptr);
  }
  for (auto& [ptr, block] : blocks_) {
    if (block.pool != pool) continue;
    block.pool = 0;
    if (block.retired) {
      block.retired = false;
      free_blocks_.emplace(FreeKey{0, block.stream, block.size}, ptr);
    }
  }
}

int64_t CachingAllocator::PoolBytes(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t bytes = 0;
  for (const auto& [ptr, block] : blocks_) {
    if (block.pool == pool) bytes += static_cast<int64_t>(block.size);
  }
  return bytes;
}

MemoryStats CachingAllocator::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
}

}  // namespace dtensor::cuda
