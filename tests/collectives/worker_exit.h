// The end of a worker binary's main (collective_worker, ring_attention_worker):
// the ranks' run becomes the process's exit code, which the tests that start
// the workers under dtrun check.
#ifndef DTENSOR_TESTS_COLLECTIVES_WORKER_EXIT_H_
#define DTENSOR_TESTS_COLLECTIVES_WORKER_EXIT_H_

#include "dtensor/collectives/backend_registry.h"

namespace dtensor::testing {

// Runs `rank_main` on `backend` with `launch` and returns the exit code:
// 0 when it returned OK, otherwise 1 after printing "FAILED: <status>" to
// stderr.
int RunWorker(const BackendDef& backend, const RankLaunch& launch,
              const RankFunction& rank_main);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_COLLECTIVES_WORKER_EXIT_H_
