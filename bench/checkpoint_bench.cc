// Checkpoint write and read throughput (dtensor/parallel/checkpoint.h) next to
// raw file writes and reads of the same bytes by the same number of threads,
// from (into) full-size buffers.
//
// The state is 4 f32 tensors of [2048, 2048] (64 MiB), sharded S(0) over a
// 1-D mesh of 1 or 4 in-process ranks. Save: sync off, so both sides measure
// the write path into the page cache, not the disk. Load: into the same
// layout, and resharded to S(1) (each rank needs a column strip, so with
// 1 MiB checksum chunks it reads nearly everything; bytes_read reports it).
// Files stay in the page cache between iterations, so reads measure the
// read path, not the disk. Throughput counts tensor bytes. Rank 0 times the
// call between two barriers (manual time).
//
//   bazel run -c opt //bench:checkpoint_bench
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/parallel/checkpoint.h"

namespace dtensor {
namespace {

constexpr int64_t kTensors = 4;
constexpr int64_t kRows = 2048;
constexpr int64_t kBytes = kTensors * kRows * kRows * 4;

std::string BenchDirectory(const std::string& name) {
  const char* root = std::getenv("TMPDIR");
  return absl::StrCat(root != nullptr ? root : "/tmp", "/dtensor_ckpt_bench_",
                      name);
}

absl::StatusOr<nn::StateDict> MakeState(std::shared_ptr<Runtime> runtime,
                                        int64_t ranks, Placement placement) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({ranks}));
  nn::StateDict state;
  for (int64_t k = 0; k < kTensors; ++k) {
    DT_ASSIGN_OR_RETURN(Tensor full,
                        Tensor::Full({kRows, kRows}, k + 0.5, DType::kF32));
    DT_ASSIGN_OR_RETURN(state[absl::StrCat("layers.", k, ".weight")],
                        DTensor::Distribute(runtime, full, mesh, {placement}));
  }
  return state;
}

enum class Mode { kSave, kLoad, kLoadResharded };

// Runs one timed save or load on `ranks` ranks; returns rank 0's seconds and
// its bytes read.
absl::Status TimedCall(Mode mode, int64_t ranks, const std::string& dir,
                       double& seconds, int64_t& bytes_read) {
  return LocalCluster(ranks).Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    const Placement placement = mode == Mode::kLoadResharded
                                    ? Placement::Shard(1)
                                    : Placement::Shard(0);
    DT_ASSIGN_OR_RETURN(nn::StateDict state,
                        MakeState(runtime, ranks, placement));
    DT_ASSIGN_OR_RETURN(auto world, groups.World());
    DT_RETURN_IF_ERROR(world->Barrier());
    const auto start = std::chrono::steady_clock::now();
    parallel::CheckpointStats stats;
    if (mode == Mode::kSave) {
      parallel::SaveOptions options;
      options.sync = false;
      options.stats = &stats;
      DT_RETURN_IF_ERROR(parallel::SaveCheckpoint(dir, state, options));
    } else {
      parallel::LoadCheckpointOptions options;
      options.stats = &stats;
      DT_RETURN_IF_ERROR(parallel::LoadCheckpoint(dir, state, options));
    }
    DT_RETURN_IF_ERROR(world->Barrier());
    if (groups.rank() == 0) {
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              start)
                    .count();
      bytes_read = stats.bytes_read * ranks;
    }
    return absl::OkStatus();
  });
}

void BM_Checkpoint(benchmark::State& state, Mode mode) {
  const int64_t ranks = state.range(0);
  const std::string dir = BenchDirectory(absl::StrCat("ckpt_", ranks));
  double seconds = 0;
  int64_t bytes_read = 0;
  if (mode != Mode::kSave) {
    absl::Status saved =
        TimedCall(Mode::kSave, ranks, dir, seconds, bytes_read);
    if (!saved.ok()) state.SkipWithError(saved.ToString().c_str());
  }
  for (auto _ : state) {
    absl::Status status = TimedCall(mode, ranks, dir, seconds, bytes_read);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    state.SetIterationTime(seconds);
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
  if (mode != Mode::kSave) {
    state.counters["read_amplification"] =
        static_cast<double>(bytes_read) / kBytes;
  }
}

// `threads` threads each write (or read back) kBytes / threads bytes of
// their own file with write(2) / pread(2), from (into) `buffers[t]`, as a
// rank writes (reads) its blocks. A write replaces the file (unlink, then
// create), as a save replaces the previous checkpoint's files.
void RawFileIo(bool write, const std::string& dir,
               std::vector<std::vector<char>>& buffers) {
  std::vector<std::thread> workers;
  for (size_t t = 0; t < buffers.size(); ++t) {
    workers.emplace_back([&, t] {
      const std::string path = absl::StrCat(dir, "_raw_", t);
      std::vector<char>& buffer = buffers[t];
      if (write) ::unlink(path.c_str());
      const int fd = write ? ::open(path.c_str(), O_WRONLY | O_CREAT, 0644)
                           : ::open(path.c_str(), O_RDONLY);
      const int64_t bytes = buffer.size();
      for (int64_t done = 0; done < bytes;) {
        const ssize_t got =
            write ? ::write(fd, buffer.data() + done, bytes - done)
                  : ::pread(fd, buffer.data() + done, bytes - done, done);
        if (got <= 0) break;
        done += got;
      }
      ::close(fd);
    });
  }
  for (std::thread& worker : workers) worker.join();
}

void BM_RawFile(benchmark::State& state, bool write) {
  const int64_t threads = state.range(0);
  const std::string dir = BenchDirectory("raw");
  std::vector<std::vector<char>> buffers(
      threads, std::vector<char>(kBytes / threads, 1));
  if (!write) RawFileIo(true, dir, buffers);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    RawFileIo(write, dir, buffers);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}

// Save, load and the raw file runs: on 1 and 4 ranks (threads), timed by
// rank 0 (manual time).
void OnOneAndFourRanks(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(4)->UseManualTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_RawFile, write, true)->Apply(OnOneAndFourRanks);
BENCHMARK_CAPTURE(BM_Checkpoint, save, Mode::kSave)->Apply(OnOneAndFourRanks);
BENCHMARK_CAPTURE(BM_RawFile, read, false)->Apply(OnOneAndFourRanks);
BENCHMARK_CAPTURE(BM_Checkpoint, load, Mode::kLoad)->Apply(OnOneAndFourRanks);
BENCHMARK_CAPTURE(BM_Checkpoint, load_resharded, Mode::kLoadResharded)
    ->Arg(4)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtensor
