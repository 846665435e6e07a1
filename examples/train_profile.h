#ifndef DTENSOR_EXAMPLES_TRAIN_PROFILE_H_
#define DTENSOR_EXAMPLES_TRAIN_PROFILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/base/profile_summary.h"
#include "dtensor/base/profiler.h"
#include "dtensor/collectives/process_groups.h"

namespace dtensor {

// What train_llama --profile keeps of one rank: its profile of the steps
// after the first (resolved), and every rank's collective wait per step
// (gathered from all ranks, so that the process of rank 0 can name an
// imbalance under dtrun too).
struct RankProfile {
  std::unique_ptr<Profiler> profiler;
  std::vector<RankWait> waits;
};

// Resolves `profiler`'s device spans and all-gathers each rank's collective
// wait per step over the world group of `groups` (every rank must call it).
// Errors: the device's, the all-gather's.
absl::StatusOr<RankProfile> FinishRankProfile(
    ProcessGroups& groups, std::unique_ptr<Profiler> profiler);

// Prints rank 0's table and the waits of every rank with the imbalance (when
// `profiles` holds rank 0: under dtrun only its process reports), and writes the Chrome trace of the ranks of `profiles` to
// `trace_path` (empty: none). A process that does not hold rank 0 (under
// dtrun) writes to `trace_path`.rank<R>, R its lowest rank, so that every
// process's tracks are kept.
// Errors: the trace file's.
absl::Status ReportProfiles(const std::map<int64_t, RankProfile>& profiles,
                            const std::string& trace_path);

}  // namespace dtensor

#endif  // DTENSOR_EXAMPLES_TRAIN_PROFILE_H_
