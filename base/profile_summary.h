#ifndef DTENSOR_BASE_PROFILE_SUMMARY_H_
#define DTENSOR_BASE_PROFILE_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "dtensor/base/profiler.h"

namespace dtensor {

// One row of a profile: the calls of one op (or one collective) in one phase.
struct ProfileRow {
  std::string name;
  ProfilePhase phase = ProfilePhase::kForward;
  bool collective = false;
  int64_t calls = 0;
  // The calls' time: device time where the op ran on a device (and
  // Profiler::Resolve read it), host wall time otherwise; for a collective,
  // the wall time the rank spent in it (its wait).
  double time_us = 0;
  bool device_time = false;
  double flops = 0;
  double bytes = 0;
};

// What one rank's profile adds up to. Only records made inside a step count
// when the profile has steps (Profiler::StepScope), so that warm-up and
// reporting stay out; without steps every record counts and the "step" is
// the span from the first record's start to the last one's end.
struct ProfileSummary {
  int64_t rank = 0;
  int64_t steps = 0;
  // Wall time of the steps together.
  double step_us = 0;
  // Host syncs inside the steps (Profiler::NoteHostSync).
  int64_t host_syncs = 0;
  // Wall time spent in collectives (the sum of the collective rows).
  double wait_us = 0;
  // Longest time first.
  std::vector<ProfileRow> rows;
};

// Requires: profiler.Resolve() was called if device times are wanted (spans
// not read yet count as wall time).
ProfileSummary Summarize(const Profiler& profiler);

// The table users read: the `top` rows by time with calls, milliseconds,
// percent of the steps' wall time, microseconds per call and achieved
// TFLOP/s (GFLOP/s below one; rows with flops) or GB/s (rows with bytes
// only), under a line
// with the steps, the time per step, the collective wait and the host syncs
// per step (issue 25's target: 0 apart from reading the loss).
std::string FormatProfileTable(const ProfileSummary& summary, int top = 25);

// One rank's collective wait, per profiled step.
struct RankWait {
  int64_t rank = 0;
  double wait_us_per_step = 0;
};
RankWait RankWaitOf(const ProfileSummary& summary);

// A rank waits "much longer than the others" when its collective wait per
// step is at least kImbalanceRatio times the least-waiting rank's and at
// least kImbalanceMinUs longer: the ratio names a real imbalance, the
// absolute floor keeps microsecond noise of fast steps from being named.
// The least-waiting rank is the straggler the named ranks wait for.
inline constexpr double kImbalanceRatio = 2.0;
inline constexpr double kImbalanceMinUs = 1000.0;

// The ranks of `waits` that wait much longer than the others (above), in
// the order given; empty with fewer than two ranks.
std::vector<int64_t> ImbalancedRanks(absl::Span<const RankWait> waits);

// Each rank's wait per step, then a line naming the imbalanced ranks and the
// straggler, or saying that the waits are balanced.
std::string FormatRankWaits(absl::Span<const RankWait> waits);

}  // namespace dtensor

#endif  // DTENSOR_BASE_PROFILE_SUMMARY_H_
