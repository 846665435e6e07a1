#ifndef DTENSOR_TENSOR_CUDA_BACKEND_H_
#define DTENSOR_TENSOR_CUDA_BACKEND_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtensor::cuda {

// The CUDA side of the tensor layer. Built with --config=cuda these call the
// CUDA runtime; otherwise every call returns FailedPrecondition saying that
// dtensor was built without CUDA. With CUDA built in but no device present,
// calls return FailedPrecondition saying so.

// True when dtensor was built with the CUDA backend.
bool BuiltWithCuda();
// Number of visible CUDA devices (0 without CUDA or without a device).
int DeviceCount();
// "built without CUDA", "no CUDA device", or a device description.
std::string Describe();

absl::StatusOr<void*> Malloc(size_t nbytes, int device);
void Free(void* ptr, int device);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
absl::Status Memcpy(void* dst, const void* src, size_t nbytes, CopyKind kind,
                    int device);
// Sets `count` 32-bit words at `dst` to `bits` (a kernel, to exercise nvcc).
absl::Status Fill32(void* dst, size_t count, unsigned bits, int device);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_BACKEND_H_
