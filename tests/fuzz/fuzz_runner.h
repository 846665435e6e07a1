#ifndef DTENSOR_TESTS_FUZZ_FUZZ_RUNNER_H_
#define DTENSOR_TESTS_FUZZ_FUZZ_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/fuzz/fuzz_targets.h"

namespace dtensor {
namespace fuzz {

struct FuzzOptions {
  uint64_t seed = 1;
  // Stops at whichever comes first.
  int64_t max_inputs = 1000000;
  absl::Duration max_time = absl::Seconds(2);
  // One input running longer than this is a hang: the watchdog prints the
  // target and the input (escaped) to stderr and ends the process with exit
  // status 3, since a hung call cannot be interrupted.
  absl::Duration hang_limit = absl::Seconds(10);
  // Inputs added to the target's seeds (a corpus directory's files).
  std::vector<std::string> extra_seeds;
};

struct FuzzStats {
  int64_t inputs = 0;
  absl::Duration slowest = absl::ZeroDuration();
};

// Runs the target's seeds, then mutations of them (deterministic given the
// seed) until a limit. The first broken contract is returned as an error
// naming the target and the input; crashes end the process (the driver
// prints the input first).
absl::StatusOr<FuzzStats> RunFuzz(const FuzzTarget& target,
                                  const FuzzOptions& options);

}  // namespace fuzz
}  // namespace dtensor

#endif  // DTENSOR_TESTS_FUZZ_FUZZ_RUNNER_H_
