#include "dtensor/tensor/cuda/caching_allocator.h"

#include <algorithm>
#include <utility>

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

void* CachingAllocator::TakeCached(size_t size, uintptr_t stream) {
  // The smallest cached block of the stream that fits and wastes at most half.
  auto it = free_blocks_.lower_bound(FreeKey{stream, size});
  if (it == free_blocks_.end() || it->first.first != stream ||
      it->first.second > 2 * size) {
    return nullptr;
  }
  void* ptr = it->second;
  free_blocks_.erase(it);
  return ptr;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t nbytes,
                                                 uintptr_t stream) {
  const size_t size = RoundSize(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* ptr = TakeCached(size, stream);
  if (ptr != nullptr) {
    ++stats_.cache_hits;
  } else {
    absl::StatusOr<void*> fresh = backing_alloc_(size);
    if (!fresh.ok()) {
      EmptyCacheLocked();
      fresh = backing_alloc_(size);
      if (!fresh.ok()) return fresh.status();
    }
    ptr = *fresh;
    blocks_[ptr] = Block{size, stream, false};
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
  it->second.in_use = false;
  stats_.allocated -= static_cast<int64_t>(it->second.size);
  free_blocks_.emplace(FreeKey{it->second.stream, it->second.size}, ptr);
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyCacheLocked();
}

void CachingAllocator::EmptyCacheLocked() {
  for (const auto& [key, ptr] : free_blocks_) {
    backing_free_(ptr);
    blocks_.erase(ptr);
    stats_.reserved -= static_cast<int64_t>(key.second);
  }
  free_blocks_.clear();
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
