#ifndef DTENSOR_BASE_PROFILE_TRACE_H_
#define DTENSOR_BASE_PROFILE_TRACE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/base/profiler.h"

namespace dtensor {

// The profiles of several ranks as one Chrome trace (chrome://tracing,
// Perfetto): {"traceEvents":[...]} with one track per rank (pid 0, tid =
// rank, named "rank N"), on which each step ("step N"), within it each
// phase (from its first record's start to its last one's end) and within
// those each op and collective are complete ("ph":"X") events that nest by
// time. Ops carry args {"phase", "device_us" (when read), "flops",
// "bytes"}; collectives have category "collective". Times are microseconds
// of each profiler's own clock (profilers made together line up).
// Requires: each profiler's Resolve() was called if device times are wanted.
std::string ProfileTraceJson(absl::Span<const Profiler* const> ranks);

// Writes ProfileTraceJson(ranks) to `path`.
// Errors: Unavailable when the file cannot be written, naming it.
absl::Status WriteProfileTrace(const std::string& path,
                               absl::Span<const Profiler* const> ranks);

}  // namespace dtensor

#endif  // DTENSOR_BASE_PROFILE_TRACE_H_
