#include "tests/collectives/worker_exit.h"

#include <cstdio>

#include "absl/status/status.h"

namespace dtensor::testing {

int RunWorker(const BackendDef& backend, const RankLaunch& launch,
              const RankFunction& rank_main) {
  const absl::Status status = backend.run(launch, rank_main);
  if (!status.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace dtensor::testing
