#ifndef DTENSOR_COLLECTIVES_COLLECTIVE_OPTIONS_H_
#define DTENSOR_COLLECTIVES_COLLECTIVE_OPTIONS_H_

#include <optional>

#include "absl/time/time.h"

namespace dtensor {

// The environment variable that switches debug mode on for communicators
// created without an explicit choice: "1", "true", "yes" or "on".
inline constexpr char kCollectivesDebugEnvVar[] = "DTENSOR_COLLECTIVES_DEBUG";

// Options of one call.
struct CollectiveOptions {
  // How long the call may wait for its peers, counted from when it starts
  // running; unset means the communicator's default. Must be positive.
  std::optional<absl::Duration> deadline;
};

// Options fixed when a backend creates its communicators. Every rank of a job
// must use the same ones.
struct CommunicatorOptions {
  // The deadline of calls that set none; unset means
  // DefaultCollectiveDeadline() at the time of the call.
  std::optional<absl::Duration> default_deadline;
  // Debug mode: before each collective, every rank checks that all ranks of
  // the group made the same call (same op, in the same order, with compatible
  // arguments); a mismatch fails on every rank with both calls in the message.
  bool debug;

  CommunicatorOptions();
  // The deadline of a call that sets none: default_deadline, else
  // DefaultCollectiveDeadline() now.
  absl::Duration DeadlineOrDefault() const;
};

// The process-wide default deadline: 5 minutes unless set.
absl::Duration DefaultCollectiveDeadline();
// Sets the process-wide default deadline (for calls and communicators that
// set none); ignored unless positive.
void SetDefaultCollectiveDeadline(absl::Duration deadline);

// Whether kCollectivesDebugEnvVar asks for debug mode.
bool DebugModeFromEnvironment();

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_COLLECTIVE_OPTIONS_H_
