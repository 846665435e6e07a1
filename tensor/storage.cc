#include "tensor/storage.h"

#include <sys/mman.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "tensor/cuda_backend.h"

namespace dtensor {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

constexpr size_t kCpuAlignment = 64;

absl::StatusOr<std::shared_ptr<Storage>> AllocateCpu(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment; an empty
  // buffer still gets one line so that data() is never null.
  // Buffers of 2 MiB or more are aligned to 2 MiB and offered to the kernel
  // as transparent huge pages: a fresh large output otherwise costs a page
  // fault per 4 KiB, which caps first-touch writes far below memory
  // bandwidth.
  const size_t alignment =
      nbytes >= kHugePageBytes ? kHugePageBytes : kCpuAlignment;
  const size_t padded = nbytes == 0
                            ? alignment
                            : (nbytes + alignment - 1) / alignment * alignment;
  if (padded < nbytes) {  // The rounding overflowed.
    return absl::ResourceExhaustedError("cannot allocate " +
                                        std::to_string(nbytes) + " bytes");
  }
  void* data = std::aligned_alloc(alignment, padded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        "out of memory allocating " + std::to_string(nbytes) + " bytes on cpu");
  }
  if (alignment == kHugePageBytes) {
    madvise(data, padded, MADV_HUGEPAGE);  // Advice only: failure is fine.
  }
  return Storage::Wrap(data, nbytes, Device::CPU(), std::free);
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
      deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

}  // namespace dtensor
