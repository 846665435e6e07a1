#include "dtensor/collectives/collective_options.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace dtensor {
namespace {

// The default deadline in nanoseconds; an atomic so that rank threads may
// read it while a test sets it.
std::atomic<int64_t>& DefaultDeadlineNanos() {
  static std::atomic<int64_t> nanos{absl::ToInt64Nanoseconds(absl::Minutes(5))};
  return nanos;
}

}  // namespace

CommunicatorOptions::CommunicatorOptions()
    : debug(DebugModeFromEnvironment()) {}

absl::Duration CommunicatorOptions::DeadlineOrDefault() const {
  return default_deadline.value_or(DefaultCollectiveDeadline());
}

absl::Duration DefaultCollectiveDeadline() {
  return absl::Nanoseconds(DefaultDeadlineNanos().load());
}

void SetDefaultCollectiveDeadline(absl::Duration deadline) {
  if (deadline <= absl::ZeroDuration()) return;
  DefaultDeadlineNanos().store(absl::ToInt64Nanoseconds(deadline));
}

bool DebugModeFromEnvironment() {
  const char* value = std::getenv(kCollectivesDebugEnvVar);
  if (value == nullptr) return false;
  const std::string lowered = absl::AsciiStrToLower(value);
  return lowered == "1" || lowered == "true" || lowered == "yes" ||
         lowered == "on";
}

}  // namespace dtensor
