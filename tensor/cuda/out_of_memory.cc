#include "dtensor/tensor/cuda/out_of_memory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dtensor::cuda {

std::string BytesText(size_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s (%d bytes)", value, kUnits[unit], bytes);
}

absl::Status OutOfDeviceMemory(size_t requested, size_t free, size_t total) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of device memory: asked for ", BytesText(requested), ", ",
      BytesText(free), " free of ", BytesText(total),
      " (after returning the allocator's cached blocks; `dtensor explain "
      "--device-memory` predicts a step's peak per rank)"));
}

}  // namespace dtensor::cuda
