#ifndef DTENSOR_TENSOR_STORAGE_H_
#define DTENSOR_TENSOR_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "dtensor/tensor/device.h"

namespace dtensor {

// A flat, owned byte buffer on one device; shared by all views of it.
// CPU buffers are 64-byte aligned. CUDA buffers need the CUDA backend
// (--config=cuda) and a device; otherwise Allocate returns an error that says
// which is missing.
class Storage {
 public:
  // Errors: no memory (ResourceExhausted); a CUDA device without the CUDA
  // backend or the device (FailedPrecondition).
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(size_t nbytes,
                                                           Device device);
  // Wraps memory owned elsewhere; `deleter` (may be empty) runs on release.
  static std::shared_ptr<Storage> Wrap(void* data, size_t nbytes, Device device,
                                       std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // The Storage objects alive in this process and the bytes they describe
  // (nbytes(), every device, wrapped memory included; an allocator's
  // padding and caches not counted): after a training step both are the
  // same every step, so a long run that keeps more shows here
  // (tests/parallel/long_run_test.cc). Another thread creating or releasing
  // storage meanwhile makes the two inconsistent with each other; read them
  // where the process is quiet for a deterministic figure. Thread-safe.
  static int64_t LiveCount();
  static int64_t LiveBytes();

 private:
  Storage(void* data, size_t nbytes, Device device,
          std::function<void(void*)> deleter);

  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void(void*)> deleter_;
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_STORAGE_H_
