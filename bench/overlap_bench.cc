// Communication overlapped with compute (issue 13): two in-process ranks,
// each running `compute` (f32 256 x 256 matmuls on one BLAS thread) and an
// all-reduce of `bytes` of f32 per iteration. Four rows per size:
//
//   compute      the matmuls alone
//   comm         the blocking all-reduce alone
//   sequential   the matmuls, then the blocking all-reduce: a step that
//                does not overlap
//   overlapped   AllReduceAsync (the communicator's worker thread), the
//                matmuls, then Wait: a step that overlaps, as the gradient
//                buckets do during backward
//
// Overlap shows as overlapped < compute + comm (at best max(compute, comm)).
// Each rank computes on its own thread and the all-reduces run on the
// communicators' worker threads, so on a machine with fewer cores than
// busy threads the overlap is bounded by the cores (docs/performance.md).
//
//   bazel run -c opt //bench:overlap_bench
#include <cblas.h>

#include <cstdint>
#include <memory>

#include "base/status_macros.h"
#include "benchmark/benchmark.h"
#include "collectives/communicator.h"
#include "collectives/inprocess/local_cluster.h"
#include "tensor/matmul.h"
#include "tensor/tensor.h"

namespace dtensor {
namespace {

constexpr int64_t kRanks = 2;
constexpr int64_t kMatrix = 256;
// About 10 ms of matmuls on one core of the 2-core VM.
constexpr int kMatmuls = 300;

enum class Mode { kCompute, kComm, kSequential, kOverlapped };

// One rank's operands: the matmul inputs and the all-reduce buffer.
struct RankWork {
  Tensor a;
  Tensor b;
  Tensor gradients;

  static absl::StatusOr<RankWork> Make(int64_t bytes) {
    RankWork work;
    DT_ASSIGN_OR_RETURN(work.a,
                        Tensor::Full({kMatrix, kMatrix}, 0.5, DType::kF32));
    DT_ASSIGN_OR_RETURN(work.b,
                        Tensor::Full({kMatrix, kMatrix}, 0.25, DType::kF32));
    DT_ASSIGN_OR_RETURN(
        work.gradients,
        Tensor::Full({bytes / static_cast<int64_t>(sizeof(float))}, 1.0,
                     DType::kF32));
    return work;
  }

  absl::Status Compute() const {
    for (int i = 0; i < kMatmuls; ++i) {
      DT_ASSIGN_OR_RETURN(Tensor c, Matmul(a, b));
      benchmark::DoNotOptimize(c.raw_data());
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

void BM_Step(benchmark::State& state, Mode mode) {
  openblas_set_num_threads(1);
  const int64_t bytes = state.range(0);
  CommunicatorOptions options;
  options.debug = false;
  const absl::Status status =
      LocalCluster(kRanks, options).Run([&](ProcessGroups& groups) {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        DT_ASSIGN_OR_RETURN(RankWork work, RankWork::Make(bytes));
        DT_RETURN_IF_ERROR(world->Barrier());
        if (groups.rank() == 0) {
          for (auto _ : state) {
            const absl::Status step = work.Run(mode, *world);
            if (!step.ok()) {
              state.SkipWithError(step.ToString().c_str());
              return step;
            }
          }
        } else {
          for (int64_t i = 0; i < state.max_iterations; ++i) {
            DT_RETURN_IF_ERROR(work.Run(mode, *world));
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  state.counters["bytes"] = static_cast<double>(bytes);
}

#define DT_OVERLAP_BENCHMARK(name, mode) \
  BENCHMARK_CAPTURE(BM_Step, name, mode) \
      ->Arg(int64_t{4} << 20)            \
      ->Arg(int64_t{16} << 20)           \
      ->Arg(int64_t{64} << 20)           \
      ->Unit(benchmark::kMillisecond)    \
      ->UseRealTime()

DT_OVERLAP_BENCHMARK(compute, Mode::kCompute);
DT_OVERLAP_BENCHMARK(comm, Mode::kComm);
DT_OVERLAP_BENCHMARK(sequential, Mode::kSequential);
DT_OVERLAP_BENCHMARK(overlapped, Mode::kOverlapped);

}  // namespace
}  // namespace dtensor
