#ifndef DTENSOR_TENSOR_CUDA_UPLOAD_STAGING_H_
#define DTENSOR_TENSOR_CUDA_UPLOAD_STAGING_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"

namespace dtensor::cuda {

// Page-locked buffers through which small host-to-device copies go without
// the host waiting for the device: the host data is copied into a free
// buffer, the device copy is queued from it and a fence (a CUDA event in the
// backend; anything in tests) recorded behind it; the buffer is free again
// once its fence has passed. So an upload is asynchronous (the training
// step's batch, for one) and the host data may be reused as soon as the call
// returns, as with a synchronous copy.
//
// At most kMaxBuffers buffers of at most kMaxBytes each are made (rounded up
// to powers of two from 64 KiB, so that repeated sizes reuse them); a request
// larger than kMaxBytes, or one that finds every buffer busy, gets none and
// the caller copies synchronously. Thread-safe.
class UploadStaging {
 public:
  static constexpr size_t kMaxBytes = size_t{8} << 20;
  static constexpr int kMaxBuffers = 16;

  struct Hooks {
    // Page-locked host memory of `nbytes` (never freed: the process keeps
    // its buffers).
    std::function<absl::StatusOr<void*>(size_t nbytes)> allocate;
    // A fence, and whether a fence recorded by Commit has passed (a fence
    // never recorded has).
    std::function<absl::StatusOr<void*>()> make_fence;
    std::function<bool(void* fence)> passed;
  };

  // One buffer, held from Acquire to Commit.
  struct Buffer {
    void* data = nullptr;
    size_t capacity = 0;
    void* fence = nullptr;
    bool held = false;
  };

  explicit UploadStaging(Hooks hooks);

  // A buffer of at least `nbytes` whose last copy has finished, or null when
  // none can be had (too large, or every buffer busy). Errors: what the
  // hooks return.
  absl::StatusOr<Buffer*> Acquire(size_t nbytes);
  // Gives `buffer` back after `record` (which records its fence behind the
  // device copy) ran; a failed `record` leaves the buffer free for the next
  // request, as the copy it followed failed too.
  absl::Status Commit(Buffer* buffer,
                      const std::function<absl::Status(void* fence)>& record);

  // Buffers made so far (tests).
  int buffers() const;

 private:
  Hooks hooks_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_UPLOAD_STAGING_H_
