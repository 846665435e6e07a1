// One rank of ring_attention_gloo_test: runs ring attention's cases
// (ring_attention_case.h) for the world dtrun started, on the backend named,
// one process per rank, each against the single-rank program. The ring's
// permutes go through the backend's asynchronous path (PermuteAsync, the
// next block's transfer started before the current block's compute).
//
//   dtrun --nproc 2|4 -- ring_attention_worker gloo
//
// Exits 0 when every case matched; prints the first failure otherwise.
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/backend_registry.h"
#include "tests/collectives/worker_exit.h"
#include "tests/ops/ring_attention_case.h"

namespace dtensor {
namespace {

int Main(int argc, char** argv) {
  absl::StatusOr<BackendDef> backend =
      BackendRegistry::Global().Find(argc == 2 ? argv[1] : "");
  if (!backend.ok()) {
    std::fprintf(stderr, "usage: ring_attention_worker <%s>\n",
                 absl::StrJoin(BackendRegistry::Global().Names(), "|").c_str());
    return 2;
  }
  return testing::RunWorker(
      *backend, RankLaunch(), [](ProcessGroups& groups) -> absl::Status {
        const auto cases = ops::testing::RingCases(groups.world_size());
        if (cases.empty()) {
          return absl::InvalidArgumentError("no cases for this many ranks");
        }
        for (const ops::testing::RingCase& c : cases) {
          DT_RETURN_IF_ERROR(ops::testing::CheckRingCase(groups, c));
        }
        std::printf("rank %lld: %zu cases match one rank\n",
                    static_cast<long long>(groups.rank()), cases.size());
        return absl::OkStatus();
      });
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) { return dtensor::Main(argc, argv); }
