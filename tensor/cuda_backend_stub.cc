// The CUDA backend when dtensor is built without --config=cuda.
#include "tensor/cuda_backend.h"

namespace dtensor::cuda {
namespace {

absl::Status NotBuilt() {
  return absl::FailedPreconditionError(
      "dtensor was built without CUDA (build with --config=cuda)");
}

}  // namespace

bool BuiltWithCuda() { return false; }
int DeviceCount() { return 0; }
std::string Describe() { return "built without CUDA"; }

absl::StatusOr<void*> Malloc(size_t, int) { return NotBuilt(); }
void Free(void*, int) {}
absl::Status Memcpy(void*, const void*, size_t, CopyKind, int) {
  return NotBuilt();
}
absl::Status Fill32(void*, size_t, unsigned, int) { return NotBuilt(); }

}  // namespace dtensor::cuda
