// Bus bandwidth of the in-process collectives (all_reduce, all_gather,
// reduce_scatter, all_to_all on f32) from 4 KiB to 256 MiB on 2 and 4 ranks,
// next to memcpy of the same bytes.
//
// NCCL-tests convention: `size` is the all_reduce buffer, the all_gather
// output, the reduce_scatter input and each rank's all_to_all buffer;
// algbw = size / time and busbw = algbw * 2(n-1)/n for all_reduce, algbw *
// (n-1)/n for the others. The memcpy rows report bytes copied / time in both
// columns. Buffers are allocated and touched once, outside the timed loop;
// rank 0 runs the benchmark loop, the other ranks the same number of calls.
//
//   bazel run -c opt //bench:collectives_bench
#include <cstdint>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace {

enum class Op { kAllReduce, kAllGather, kReduceScatter, kAllToAll };

double BusFactor(Op op, int64_t ranks) {
  const double n = static_cast<double>(ranks);
  return op == Op::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

// One rank's buffers for `op` on `size` bytes of f32, and the call.
struct RankBuffers {
  Tensor input;
  Tensor output;

  static absl::StatusOr<RankBuffers> Make(Op op, int64_t count, int64_t ranks) {
    RankBuffers buffers;
    const int64_t piece = count / ranks;
    const int64_t in = op == Op::kAllGather ? piece : count;
    const int64_t out = op == Op::kReduceScatter ? piece : count;
    DT_ASSIGN_OR_RETURN(buffers.input, Tensor::Zeros({in}, DType::kF32));
    if (op != Op::kAllReduce) {
      DT_ASSIGN_OR_RETURN(buffers.output, Tensor::Zeros({out}, DType::kF32));
    }
    return buffers;
  }

  absl::Status Run(Op op, Communicator& comm) const {
    switch (op) {
      case Op::kAllReduce:
        return comm.AllReduce(input, ReduceOp::kSum);
      case Op::kAllGather:
        return comm.AllGather(input, output, 0);
      case Op::kReduceScatter:
        return comm.ReduceScatter(input, output, 0, ReduceOp::kSum);
      case Op::kAllToAll:
        return comm.AllToAll(input, output, 0, 0);
    }
    return absl::InternalError("unknown op");
  }
};

void SetBandwidth(benchmark::State& state, int64_t bytes, double bus_factor) {
  state.counters["algbw"] =
      benchmark::Counter(static_cast<double>(bytes),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["busbw"] =
      benchmark::Counter(static_cast<double>(bytes) * bus_factor,
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Collective(benchmark::State& state, Op op, int64_t ranks) {
  const int64_t bytes = state.range(0);
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
  CommunicatorOptions options;
  options.debug = false;
  const absl::Status status =
      LocalCluster(ranks, options).Run([&](ProcessGroups& groups) {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        DT_ASSIGN_OR_RETURN(RankBuffers buffers,
                            RankBuffers::Make(op, count, ranks));
        DT_RETURN_IF_ERROR(world->Barrier());
        if (groups.rank() == 0) {
          for (auto _ : state) {
            const absl::Status call = buffers.Run(op, *world);
            if (!call.ok()) {
              state.SkipWithError(call.ToString().c_str());
              return call;
            }
          }
        } else {
          for (int64_t i = 0; i < state.max_iterations; ++i) {
            DT_RETURN_IF_ERROR(buffers.Run(op, *world));
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) {
    state.SkipWithError(status.ToString().c_str());
    return;
  }
  SetBandwidth(state, bytes, BusFactor(op, ranks));
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::vector<char> src(bytes, 1);
  std::vector<char> dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  SetBandwidth(state, bytes, 1.0);
}

constexpr int64_t kMinBytes = int64_t{4} << 10;
constexpr int64_t kMaxBytes = int64_t{256} << 20;

BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);

#define DT_COLLECTIVE_BENCHMARK(name, op, ranks)    \
  BENCHMARK_CAPTURE(BM_Collective, name, op, ranks) \
      ->RangeMultiplier(4)                          \
      ->Range(kMinBytes, kMaxBytes)                 \
      ->UseRealTime()

DT_COLLECTIVE_BENCHMARK(all_reduce_2ranks, Op::kAllReduce, 2);
DT_COLLECTIVE_BENCHMARK(all_reduce_4ranks, Op::kAllReduce, 4);
DT_COLLECTIVE_BENCHMARK(all_gather_2ranks, Op::kAllGather, 2);
DT_COLLECTIVE_BENCHMARK(all_gather_4ranks, Op::kAllGather, 4);
DT_COLLECTIVE_BENCHMARK(reduce_scatter_2ranks, Op::kReduceScatter, 2);
DT_COLLECTIVE_BENCHMARK(reduce_scatter_4ranks, Op::kReduceScatter, 4);
DT_COLLECTIVE_BENCHMARK(all_to_all_2ranks, Op::kAllToAll, 2);
DT_COLLECTIVE_BENCHMARK(all_to_all_4ranks, Op::kAllToAll, 4);

}  // namespace
}  // namespace dtensor
