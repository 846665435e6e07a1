#ifndef DTENSOR_TESTS_COLLECTIVES_WORKER_LAUNCH_H_
#define DTENSOR_TESTS_COLLECTIVES_WORKER_LAUNCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dtensor::testing {

// How the processes of one scenario of collective_worker ended.
struct WorkerOutcome {
  std::vector<int> exit_codes;
  // Every process's output, each line prefixed "[rank N] ".
  std::string output;
  absl::Duration took;
};

struct WorkerLaunch {
  std::string backend = "gloo";  // "gloo" or "nccl".
  std::string scenario;
  int64_t nproc = 1;
  // Terminate the others when one process fails.
  bool terminate_on_failure = true;
  // Rank 0 hosts the store on this port; by default the launcher hosts it.
  std::optional<int> store_port;
};

// Runs the worker processes as dtrun would (and ends them after 90 s).
WorkerOutcome RunWorkers(const WorkerLaunch& launch);

// Every process exited with 0; shows the output otherwise.
::testing::AssertionResult AllSucceeded(const WorkerOutcome& outcome,
                                        int64_t nproc);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_COLLECTIVES_WORKER_LAUNCH_H_
