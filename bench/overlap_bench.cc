// Communication overlapped with compute (issue 13), on any CPU backend: each
// rank runs `--matmuls` f32 256 x 256 matmuls (one BLAS thread) and an
// all-reduce of `--mib` MiB of f32 per iteration, in four modes:
//
//   compute      the matmuls alone
//   comm         the blocking all-reduce alone
//   sequential   the matmuls, then the blocking all-reduce: a step that
//                does not overlap
//   overlapped   AllReduceAsync (run by the backend's worker thread), the
//                matmuls, then Wait: what the gradient buckets do during
//                backward
//
// Rank 0 prints the median milliseconds of each mode and the share of the
// shorter of compute and comm that overlapping took off the step:
//   hidden = (sequential - overlapped) / min(compute, comm).
// Communication whose cost is CPU work (the in-process backend's copies and
// sums, Gloo's socket copies) can only hide behind compute where a core is
// free for it (docs/performance.md).
//
//   bazel-bin/bench/overlap_bench [--ranks 2] [--matmuls 15] [--mib 64]
//                                 [--iterations 20]
//   cd bazel-bin && tools/dtrun --nproc 2 -- bench/overlap_bench --backend gloo
// --backend takes any registered backend that runs on the CPU.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/backend_registry.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/tensor.h"
#include "tools/arg_parser.h"
#include "tools/backend_flag.h"

namespace dtensor {
namespace {

constexpr int64_t kMatrix = 256;

struct Options {
  // The --backend flag and the backend it names (tools/backend_flag.h).
  std::string backend = "inprocess";
  BackendDef backend_def;
  int64_t ranks = 2;
  int64_t matmuls = 15;
  int64_t mib = 64;
  int64_t iterations = 20;
};

enum class Mode { kCompute, kComm, kSequential, kOverlapped };
constexpr Mode kModes[] = {Mode::kCompute, Mode::kComm, Mode::kSequential,
                           Mode::kOverlapped};

// One rank's operands: the matmul inputs and the all-reduce buffer.
struct RankWork {
  Tensor a;
  Tensor b;
  Tensor gradients;
  int64_t matmuls = 0;

  static absl::StatusOr<RankWork> Make(const Options& options) {
    RankWork work;
    work.matmuls = options.matmuls;
    DT_ASSIGN_OR_RETURN(work.a,
                        Tensor::Full({kMatrix, kMatrix}, 0.5, DType::kF32));
    DT_ASSIGN_OR_RETURN(work.b,
                        Tensor::Full({kMatrix, kMatrix}, 0.25, DType::kF32));
    DT_ASSIGN_OR_RETURN(work.gradients, Tensor::Full({(options.mib << 20) / 4},
                                                     1.0, DType::kF32));
    return work;
  }

  absl::Status Compute() const {
    for (int64_t i = 0; i < matmuls; ++i) {
      DT_RETURN_IF_ERROR(Matmul(a, b).status());
    }
    return absl::OkStatus();
  }

  absl::Status Run(Mode mode, Communicator& comm) const {
    switch (mode) {
      case Mode::kCompute:
        return Compute();
      case Mode::kComm:
        return comm.AllReduce(gradients, ReduceOp::kSum);
      case Mode::kSequential:
        DT_RETURN_IF_ERROR(Compute());
        return comm.AllReduce(gradients, ReduceOp::kSum);
      case Mode::kOverlapped: {
        std::shared_ptr<Work> pending =
            comm.AllReduceAsync(gradients, ReduceOp::kSum);
        DT_RETURN_IF_ERROR(Compute());
        return pending->Wait();
      }
    }
    return absl::InternalError("unknown mode");
  }
};

// The median milliseconds of `iterations` runs of `mode`, after one
// untimed run; the ranks start each mode together.
absl::StatusOr<double> MedianMs(const RankWork& work, Mode mode,
                                Communicator& comm, int64_t iterations) {
  DT_RETURN_IF_ERROR(comm.Barrier());
  DT_RETURN_IF_ERROR(work.Run(mode, comm));
  std::vector<double> ms;
  for (int64_t i = 0; i < iterations; ++i) {
    DT_RETURN_IF_ERROR(comm.Barrier());
    const auto start = std::chrono::steady_clock::now();
    DT_RETURN_IF_ERROR(work.Run(mode, comm));
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

absl::Status RunRank(ProcessGroups& groups, const Options& options) {
  openblas_set_num_threads(1);
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  DT_ASSIGN_OR_RETURN(RankWork work, RankWork::Make(options));
  double ms[4];
  for (int m = 0; m < 4; ++m) {
    DT_ASSIGN_OR_RETURN(ms[m],
                        MedianMs(work, kModes[m], *world, options.iterations));
  }
  if (groups.rank() != 0) return absl::OkStatus();
  const double hidden = (ms[2] - ms[3]) / std::min(ms[0], ms[1]);
  std::printf(
      "%s, %lld ranks, %lld matmuls, all_reduce %lld MiB: compute %.2f ms  "
      "comm %.2f ms  sequential %.2f ms  overlapped %.2f ms  hidden %.0f%%\n",
      options.backend.c_str(), static_cast<long long>(world->size()),
      static_cast<long long>(options.matmuls),
      static_cast<long long>(options.mib), ms[0], ms[1], ms[2], ms[3],
      100 * hidden);
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  constexpr FlagSpec kFlags[] = {
      {"backend"}, {"ranks"}, {"matmuls"}, {"mib"}, {"iterations"}};
  DT_ASSIGN_OR_RETURN(const ParsedArgs parsed, ParseArgs(args, kFlags));
  DT_RETURN_IF_ERROR(parsed.CheckNoPositional());
  Options options;
  options.backend = parsed.ValueOr("backend", options.backend);
  DT_ASSIGN_OR_RETURN(options.backend_def,
                      ParseBackendFlag(options.backend, DeviceType::kCPU));
  for (auto [flag, value] :
       {std::pair{"ranks", &options.ranks},
        std::pair{"matmuls", &options.matmuls}, std::pair{"mib", &options.mib},
        std::pair{"iterations", &options.iterations}}) {
    if (parsed.Has(flag) &&
        (!absl::SimpleAtoi(parsed.ValueOr(flag, ""), value) || *value < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " needs a positive integer, got ",
                       parsed.ValueOr(flag, "")));
    }
  }
  return options;
}

absl::Status Main(int argc, char** argv) {
  DT_ASSIGN_OR_RETURN(
      const Options options,
      ParseOptions(std::vector<std::string>(argv + 1, argv + argc)));
  // --ranks is the number of in-process ranks; under dtrun, --nproc's.
  RankLaunch launch;
  launch.world_size = options.ranks;
  launch.communicator.debug = false;
  return options.backend_def.run(
      launch, [&](ProcessGroups& groups) { return RunRank(groups, options); });
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  const absl::Status status = dtensor::Main(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "overlap_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
