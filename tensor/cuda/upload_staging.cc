#include "dtensor/tensor/cuda/upload_staging.h"

#include <utility>

namespace dtensor::cuda {
namespace {

constexpr size_t kMinBytes = size_t{64} << 10;

size_t RoundUp(size_t nbytes) {
  size_t capacity = kMinBytes;
  while (capacity < nbytes) capacity *= 2;
  return capacity;
}

}  // namespace

UploadStaging::UploadStaging(Hooks hooks) : hooks_(std::move(hooks)) {}

absl::StatusOr<UploadStaging::Buffer*> UploadStaging::Acquire(size_t nbytes) {
  if (nbytes > kMaxBytes) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  // The smallest free buffer that fits, so that large ones stay for large
  // requests.
  Buffer* best = nullptr;
  for (const std::unique_ptr<Buffer>& buffer : buffers_) {
    if (buffer->held || buffer->capacity < nbytes) continue;
    if (best != nullptr && best->capacity <= buffer->capacity) continue;
    if (hooks_.passed(buffer->fence)) best = buffer.get();
  }
  if (best == nullptr) {
    if (static_cast<int>(buffers_.size()) >= kMaxBuffers) return nullptr;
    auto made = std::make_unique<Buffer>();
    made->capacity = RoundUp(nbytes);
    absl::StatusOr<void*> data = hooks_.allocate(made->capacity);
    if (!data.ok()) return data.status();
    absl::StatusOr<void*> fence = hooks_.make_fence();
    if (!fence.ok()) return fence.status();
    made->data = *data;
    made->fence = *fence;
    best = made.get();
    buffers_.push_back(std::move(made));
  }
  best->held = true;
  return best;
}

absl::Status UploadStaging::Commit(
    Buffer* buffer, const std::function<absl::Status(void* fence)>& record) {
  const absl::Status recorded = record(buffer->fence);
  std::lock_guard<std::mutex> lock(mu_);
  buffer->held = false;
  return recorded;
}

int UploadStaging::buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(buffers_.size());
}

}  // namespace dtensor::cuda
