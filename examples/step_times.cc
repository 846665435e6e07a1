#include "examples/step_times.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "dtensor/tensor/cuda_backend.h"

namespace dtensor {

std::string StepTimes::Summary(int64_t first_step, int64_t warmup,
                               int64_t tokens_per_step,
                               const Device& device) const {
  if (seconds_.empty()) return "";
  const int64_t count = static_cast<int64_t>(seconds_.size());
  const int64_t skip = count > warmup ? warmup : 0;
  std::vector<double> steady(seconds_.begin() + skip, seconds_.end());
  std::sort(steady.begin(), steady.end());
  // The median of an even count is the mean of the middle two.
  const size_t mid = steady.size() / 2;
  const double median = steady.size() % 2 == 1
                            ? steady[mid]
                            : (steady[mid - 1] + steady[mid]) / 2;
  std::string line = absl::StrFormat(
      "steady state, steps %d-%d: %.1f ms a step (median), %.0f tokens/s",
      first_step + skip, first_step + count - 1, median * 1e3,
      static_cast<double>(tokens_per_step) / median);
  if (device.is_cuda()) {
    const cuda::MemoryStats stats = cuda::GetMemoryStats(device.index);
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    absl::StrAppendFormat(&line,
                          "; device memory peak %.2f GiB allocated, %.2f GiB "
                          "reserved",
                          stats.peak_allocated / kGiB, stats.reserved / kGiB);
  }
  return line + "\n";
}

}  // namespace dtensor
