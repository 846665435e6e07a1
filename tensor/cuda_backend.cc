// The CUDA backend over the CUDA runtime (built with --config=cuda).
#include "tensor/cuda_backend.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "tensor/cuda/kernels.h"

namespace dtensor::cuda {
namespace {

absl::Status FromCuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

// Selects `device`, or says why it cannot be used.
absl::Status UseDevice(int device) {
  const int count = DeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError("no CUDA device is present");
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", device, " does not exist (", count, " present)"));
  }
  return FromCuda(cudaSetDevice(device), "cudaSetDevice");
}

cudaMemcpyKind ToCuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // Clears the sticky "no device" error.
    return 0;
  }
  return count;
}

std::string Describe() {
  const int count = DeviceCount();
  if (count == 0) return "no CUDA device";
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) {
    return absl::StrCat(count, " CUDA device(s)");
  }
  return absl::StrCat(count, " CUDA device(s), device 0: ", properties.name);
}

absl::StatusOr<void*> Malloc(size_t nbytes, int device) {
  absl::Status status = UseDevice(device);
  if (!status.ok()) return status;
  void* ptr = nullptr;
  status = FromCuda(cudaMalloc(&ptr, nbytes == 0 ? 1 : nbytes), "cudaMalloc");
  if (!status.ok()) return status;
  return ptr;
}

void Free(void* ptr, int device) {
  if (ptr == nullptr || !UseDevice(device).ok()) return;
  cudaFree(ptr);
}

absl::Status Memcpy(void* dst, const void* src, size_t nbytes, CopyKind kind,
                    int device) {
  absl::Status status = UseDevice(device);
  if (!status.ok()) return status;
  return FromCuda(cudaMemcpy(dst, src, nbytes, ToCuda(kind)), "cudaMemcpy");
}

absl::Status Fill32(void* dst, size_t count, unsigned bits, int device) {
  absl::Status status = UseDevice(device);
  if (!status.ok()) return status;
  status =
      FromCuda(LaunchFill32(static_cast<unsigned*>(dst), count, bits, nullptr),
               "Fill32 launch");
  if (!status.ok()) return status;
  return FromCuda(cudaDeviceSynchronize(), "Fill32");
}

}  // namespace dtensor::cuda
