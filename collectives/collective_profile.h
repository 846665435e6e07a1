#ifndef DTENSOR_COLLECTIVES_COLLECTIVE_PROFILE_H_
#define DTENSOR_COLLECTIVES_COLLECTIVE_PROFILE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "dtensor/collectives/work.h"

namespace dtensor {

// The time a rank waits in collectives, for the profilers active on the
// calling thread (dtensor/base/profiler.h): the host wall time of a blocking
// call, and of Wait() on an asynchronous one. It counts the wait for the
// peers and the transfer alike (every backend's blocking call returns once
// the data is there: NCCL's polls the call's event), so a rank that arrives
// early waits longest.

// Records a collective `op` waited for from `start_us` (Profiler::ClockUs())
// until now.
void RecordCollectiveWait(absl::string_view op, double start_us);

// `work`, whose Wait() records the time it blocks as a wait in `op`
// (the first Wait only: later ones return at once). Returns `work` itself
// when no profiler is active on this thread.
// Requires: `op` outlives the returned Work (CollectiveOpName's names do).
std::shared_ptr<Work> ProfiledWork(std::shared_ptr<Work> work,
                                   absl::string_view op);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_COLLECTIVE_PROFILE_H_
