#include "dtensor/tensor/storage.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/large_buffer_cache.h"
#include "dtensor/tensor/storage_peak.h"

namespace dtensor {
namespace {

constexpr size_t kCpuAlignment = 64;

// Storage::LiveCount and LiveBytes. Relaxed: counts, not synchronization.
std::atomic<int64_t> live_count{0};
std::atomic<int64_t> live_bytes{0};
// PeakLiveStorageBytes: the most live_bytes reached since the last reset.
std::atomic<int64_t> peak_live_bytes{0};

absl::StatusOr<std::shared_ptr<Storage>> AllocateCpu(size_t nbytes) {
  // Buffers of kMinBytes or more are recycled by the large-buffer cache
  // (see large_buffer_cache.h: kMinBytes-aligned, and huge-page advised from
  // kHugePageBytes). Others: aligned_alloc needs a multiple of the
  // alignment, and an empty buffer still gets one line so that data() is
  // never null.
  const bool large = nbytes >= LargeBufferCache::kMinBytes;
  const size_t alignment = large ? LargeBufferCache::kMinBytes : kCpuAlignment;
  const size_t padded = nbytes == 0
                            ? alignment
                            : (nbytes + alignment - 1) / alignment * alignment;
  if (padded < nbytes) {  // The rounding overflowed.
    return absl::ResourceExhaustedError("cannot allocate " +
                                        std::to_string(nbytes) + " bytes");
  }
  void* data = large ? LargeBufferCache::Shared().Allocate(padded)
                     : std::aligned_alloc(alignment, padded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        "out of memory allocating " + std::to_string(nbytes) + " bytes on cpu");
  }
  if (!large) return Storage::Wrap(data, nbytes, Device::CPU(), std::free);
  return Storage::Wrap(data, nbytes, Device::CPU(), [padded](void* buffer) {
    LargeBufferCache::Shared().Release(buffer, padded);
  });
}

absl::StatusOr<std::shared_ptr<Storage>> AllocateCuda(size_t nbytes,
                                                      Device device) {
  const int index = device.index;
  auto data = cuda::Malloc(nbytes, index);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        "cannot allocate " + std::to_string(nbytes) +
                            " bytes on " + device.ToString() + ": " +
                            std::string(data.status().message()));
  }
  return Storage::Wrap(*data, nbytes, device,
                       [index](void* ptr) { cuda::Free(ptr, index); });
}

}  // namespace

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(size_t nbytes,
                                                           Device device) {
  if (device.is_cpu()) return AllocateCpu(nbytes);
  if (device.index < 0) {
    return absl::InvalidArgumentError("invalid device " + device.ToString());
  }
  return AllocateCuda(nbytes, device);
}

std::shared_ptr<Storage> Storage::Wrap(void* data, size_t nbytes, Device device,
                                       std::function<void(void*)> deleter) {
  return std::shared_ptr<Storage>(
      new Storage(data, nbytes, device, std::move(deleter)));
}

Storage::Storage(void* data, size_t nbytes, Device device,
                 std::function<void(void*)> deleter)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      deleter_(std::move(deleter)) {
  live_count.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = live_bytes.fetch_add(static_cast<int64_t>(nbytes_),
                                           std::memory_order_relaxed) +
                      static_cast<int64_t>(nbytes_);
  int64_t peak = peak_live_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_live_bytes.compare_exchange_weak(
                           peak, now, std::memory_order_relaxed)) {
  }
}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
  live_count.fetch_sub(1, std::memory_order_relaxed);
  live_bytes.fetch_sub(static_cast<int64_t>(nbytes_),
                       std::memory_order_relaxed);
}

int64_t Storage::LiveCount() {
  return live_count.load(std::memory_order_relaxed);
}

int64_t Storage::LiveBytes() {
  return live_bytes.load(std::memory_order_relaxed);
}

int64_t PeakLiveStorageBytes() {
  return peak_live_bytes.load(std::memory_order_relaxed);
}

void ResetPeakLiveStorageBytes() {
  peak_live_bytes.store(live_bytes.load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
}

}  // namespace dtensor
