// Bus bandwidth of the Gloo backend next to Gloo called directly on the same
// buffers: all_reduce, all_gather, reduce_scatter and all_to_all of f32, 4 KiB
// to 64 MiB, on two processes over loopback.
//
// Bus bandwidth follows nccl-tests: S / time scaled by 2(n-1)/n for
// all_reduce and (n-1)/n for the others (1 and 1/2 on two ranks), where S is
// the all_reduce tensor, the all_gather output, the reduce_scatter input and
// each rank's all_to_all buffer.
//
// "backend" is the Communicator; "gloo" is the Gloo algorithm the backend
// uses, called directly (reduce_scatter: Gloo's alltoallv, then the same
// local reduction); "gloo_halving_doubling" is Gloo's legacy reduce-scatter,
// for comparison. The "_1rank" variants run the same calls on a group of one
// (rank 0 alone, no network): their difference is the backend's own cost
// per call, free of the scheduling noise of two processes.
//
// The program forks a second process (rank 1) that mirrors every run of
// rank 0: before each run rank 0 broadcasts what to run and how many
// iterations. Benchmark flags go to rank 0.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "dtensor/base/enum_names.h"
#include "dtensor/collectives/gloo/gloo_backend.h"
#include "dtensor/collectives/gloo/gloo_store.h"
#include "dtensor/collectives/multiprocess/store_client.h"
#include "dtensor/collectives/multiprocess/store_server.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/collectives/reduce_kernel.h"
#include "dtensor/tensor/tensor.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/math.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace dtensor {
namespace {

constexpr int kRanks = 2;
constexpr int64_t kMinBytes = int64_t{4} << 10;
constexpr int64_t kMaxBytes = int64_t{64} << 20;

enum class Op : int64_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kQuit
};
enum class Impl : int64_t {
  kBackend,
  kGloo,
  kGlooHalvingDoubling,
  kBackendOneRank,
  kGlooOneRank
};

bool OneRank(Impl impl) {
  return impl == Impl::kBackendOneRank || impl == Impl::kGlooOneRank;
}

constexpr EnumNames<Impl, Impl::kGlooOneRank> kImplNames(
    "backend", "gloo", "gloo_halving_doubling", "backend_1rank", "gloo_1rank");

double BusFactor(Op op) {
  return op == Op::kAllReduce ? 2.0 * (kRanks - 1) / kRanks
                              : 1.0 * (kRanks - 1) / kRanks;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gloo_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const absl::Status& status) {
  if (!status.ok()) Die(status.ToString());
}

// This process's ends of the job.
struct Job {
  int rank = 0;
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<gloo::Context> raw;
  // Groups of this rank alone.
  std::shared_ptr<Communicator> local_comm;
  std::shared_ptr<gloo::Context> local_raw;
  uint32_t next_tag = 1;
  uint32_t local_tag = 1;
};

Job* job = nullptr;

Tensor Floats(int64_t count) {
  return Tensor::Zeros({count}, DType::kF32).value();
}

float* Data(const Tensor& tensor) { return tensor.data<float>(); }

// What one iteration runs on: the communicator or raw Gloo context of the
// job's two ranks or of this rank alone, and the element counts.
struct StepSetup {
  Impl impl;  // kBackend, kGloo or kGlooHalvingDoubling.
  int ranks;
  int64_t count;
  int64_t piece;  // count / ranks.
  Communicator* comm;
  std::shared_ptr<gloo::Context> raw;
  // Each context numbers its own calls: the two ranks' counters must agree.
  uint32_t* tag;
};

StepSetup SetupFor(Impl impl, int64_t bytes) {
  const bool one_rank = OneRank(impl);
  if (impl == Impl::kBackendOneRank) impl = Impl::kBackend;
  if (impl == Impl::kGlooOneRank) impl = Impl::kGloo;
  const int ranks = one_rank ? 1 : kRanks;
  const int64_t count = bytes / sizeof(float);
  return StepSetup{impl,
                   ranks,
                   count,
                   count / ranks,
                   one_rank ? job->local_comm.get() : job->comm.get(),
                   one_rank ? job->local_raw : job->raw,
                   one_rank ? &job->local_tag : &job->next_tag};
}

std::function<void()> AllReduceStep(const StepSetup& s) {
  Tensor tensor = Floats(s.count);
  Communicator* comm = s.comm;
  if (s.impl == Impl::kBackend) {
    return [comm, tensor] { Check(comm->AllReduce(tensor, ReduceOp::kSum)); };
  }
  return [raw = s.raw, tag = s.tag, tensor, count = s.count] {
    gloo::AllreduceOptions opts(raw);
    opts.setOutput<float>(Data(tensor), count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
    opts.setTag((*tag)++);
    gloo::allreduce(opts);
  };
}

std::function<void()> AllGatherStep(const StepSetup& s) {
  Tensor input = Floats(s.piece);
  Tensor output = Floats(s.count);
  Communicator* comm = s.comm;
  if (s.impl == Impl::kBackend) {
    return [comm, input, output] { Check(comm->AllGather(input, output, 0)); };
  }
  return [raw = s.raw, tag = s.tag, input, output, piece = s.piece,
          ranks = s.ranks] {
    gloo::AllgathervOptions opts(raw);
    opts.setInput<float>(Data(input), piece);
    opts.setOutput<float>(Data(output), std::vector<size_t>(ranks, piece));
    opts.setTag((*tag)++);
    gloo::allgatherv(opts);
  };
}

std::function<void()> ReduceScatterStep(const StepSetup& s) {
  Tensor input = Floats(s.count);
  Tensor output = Floats(s.piece);
  Communicator* comm = s.comm;
  if (s.impl == Impl::kBackend) {
    return [comm, input, output] {
      Check(comm->ReduceScatter(input, output, 0, ReduceOp::kSum));
    };
  }
  if (s.impl == Impl::kGlooHalvingDoubling) {
    auto algorithm =
        std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
            s.raw, std::vector<float*>{Data(input)}, static_cast<int>(s.count),
            std::vector<int>(s.ranks, static_cast<int>(s.piece)));
    return [algorithm, input] { algorithm->run(); };
  }
  Tensor received = Floats(s.count);
  return [raw = s.raw, tag = s.tag, input, output, received, piece = s.piece,
          ranks = s.ranks] {
    gloo::AlltoallvOptions opts(raw);
    opts.setInput<float>(Data(input), std::vector<int64_t>(ranks, piece));
    opts.setOutput<float>(Data(received), std::vector<int64_t>(ranks, piece));
    opts.setTag((*tag)++);
    gloo::alltoallv(opts);
    std::vector<const void*> pieces;
    for (int r = 0; r < ranks; ++r) {
      pieces.push_back(Data(received) + r * piece);
    }
    ReduceInto(DType::kF32, ReduceOp::kSum, pieces, Data(output), piece);
  };
}

std::function<void()> AllToAllStep(const StepSetup& s) {
  Tensor input = Floats(s.count);
  Tensor output = Floats(s.count);
  Communicator* comm = s.comm;
  if (s.impl == Impl::kBackend) {
    return
        [comm, input, output] { Check(comm->AllToAll(input, output, 0, 0)); };
  }
  return [raw = s.raw, tag = s.tag, input, output, piece = s.piece,
          ranks = s.ranks] {
    gloo::AlltoallvOptions opts(raw);
    opts.setInput<float>(Data(input), std::vector<int64_t>(ranks, piece));
    opts.setOutput<float>(Data(output), std::vector<int64_t>(ranks, piece));
    opts.setTag((*tag)++);
    gloo::alltoallv(opts);
  };
}

// The collectives measured, in Op order (kQuit, which stops the mirror, is
// none of them): the name and the maker of one iteration.
struct OpInfo {
  const char* name;
  std::function<void()> (*make_step)(const StepSetup& setup);
};
constexpr OpInfo kOps[] = {{"all_reduce", AllReduceStep},
                           {"all_gather", AllGatherStep},
                           {"reduce_scatter", ReduceScatterStep},
                           {"all_to_all", AllToAllStep}};
static_assert(std::size(kOps) == static_cast<size_t>(Op::kQuit),
              "one entry per collective");

const OpInfo& InfoOf(Op op) { return kOps[static_cast<size_t>(op)]; }

// One iteration of `op` (not kQuit) by `impl` on `bytes`, with its buffers.
std::function<void()> MakeStep(Op op, Impl impl, int64_t bytes) {
  return InfoOf(op).make_step(SetupFor(impl, bytes));
}

// Rank 0 tells rank 1 what to run next.
void Announce(Op op, Impl impl, int64_t bytes, int64_t iterations) {
  Tensor command = Tensor::FromVector<int64_t>(
                       {static_cast<int64_t>(op), static_cast<int64_t>(impl),
                        bytes, iterations},
                       {4})
                       .value();
  Check(job->comm->Broadcast(command, 0));
}

void BM_Collective(benchmark::State& state, Op op, Impl impl) {
  const int64_t bytes = state.range(0);
  // A group of one needs no mirror.
  if (!OneRank(impl)) Announce(op, impl, bytes, state.max_iterations);
  std::function<void()> step = MakeStep(op, impl, bytes);
  for (auto _ : state) step();
  state.SetBytesProcessed(state.iterations() * bytes);
  if (OneRank(impl)) return;
  state.counters["busbw"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * bytes * BusFactor(op),
      benchmark::Counter::kIsRate);
}

// Rank 1: runs what rank 0 announces until it says quit.
void Mirror() {
  while (true) {
    Tensor command = Tensor::Zeros({4}, DType::kI64).value();
    Check(job->comm->Broadcast(command, 0));
    const std::vector<int64_t> fields = command.ToVector<int64_t>().value();
    const Op op = static_cast<Op>(fields[0]);
    if (op == Op::kQuit) return;
    std::function<void()> step =
        MakeStep(op, static_cast<Impl>(fields[1]), fields[2]);
    for (int64_t i = 0; i < fields[3]; ++i) step();
  }
}

// Registers "<op>/<impl>", timed in real time.
benchmark::internal::Benchmark* Register(Op op, Impl impl) {
  return benchmark::RegisterBenchmark(
             absl::StrCat(InfoOf(op).name, "/", kImplNames.Name(impl)).c_str(),
             [op, impl](benchmark::State& state) {
               BM_Collective(state, op, impl);
             })
      ->UseRealTime();
}

void RegisterAll() {
  for (Op op :
       {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter, Op::kAllToAll}) {
    std::vector<Impl> impls = {Impl::kBackend, Impl::kGloo};
    if (op == Op::kReduceScatter) impls.push_back(Impl::kGlooHalvingDoubling);
    for (Impl impl : impls) {
      Register(op, impl)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
    }
    for (Impl impl : {Impl::kBackendOneRank, Impl::kGlooOneRank}) {
      Register(op, impl)->Arg(kMinBytes)->Arg(int64_t{1} << 20);
    }
  }
}

int FreePort() {
  absl::StatusOr<std::unique_ptr<StoreServer>> probe =
      StoreServer::Start("127.0.0.1", 0);
  if (!probe.ok()) Die(probe.status().ToString());
  return (*probe)->port();
}

int Main(int argc, char** argv) {
  const int port = FreePort();
  const pid_t child = ::fork();
  if (child < 0) Die("fork failed");
  Job this_job;
  this_job.rank = child == 0 ? 1 : 0;
  if (this_job.rank == 1) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  GlooBackendOptions options;
  options.rank = this_job.rank;
  options.world_size = kRanks;
  options.master_port = port;
  options.host_store = this_job.rank == 0;
  options.communicator.default_deadline = absl::Minutes(2);
  absl::StatusOr<std::shared_ptr<GlooBackend>> backend =
      GlooBackend::Create(options);
  if (!backend.ok()) Die(backend.status().ToString());
  ProcessGroups groups(*backend);
  absl::StatusOr<std::shared_ptr<Communicator>> world = groups.World();
  if (!world.ok()) Die(world.status().ToString());
  this_job.comm = *world;
  // The direct Gloo context: its own connections, met through the store.
  absl::StatusOr<std::unique_ptr<StoreClient>> client =
      StoreClient::Connect("127.0.0.1", port, -1, absl::Minutes(1));
  if (!client.ok()) Die(client.status().ToString());
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto raw = std::make_shared<gloo::rendezvous::Context>(this_job.rank, kRanks);
  raw->setTimeout(std::chrono::minutes(2));
  GlooStore store(**client, "direct/", std::chrono::minutes(1));
  raw->connectFullMesh(store, device);
  this_job.raw = raw;
  // This rank alone: a communicator and a Gloo context of one.
  absl::StatusOr<std::shared_ptr<Communicator>> alone =
      groups.ForRanks({this_job.rank});
  if (!alone.ok()) Die(alone.status().ToString());
  this_job.local_comm = *alone;
  auto local_raw = std::make_shared<gloo::rendezvous::Context>(0, 1);
  GlooStore local_store(**client, absl::StrCat("alone", this_job.rank, "/"),
                        std::chrono::minutes(1));
  local_raw->connectFullMesh(local_store, device);
  this_job.local_raw = local_raw;
  job = &this_job;
  if (this_job.rank == 1) {
    Mirror();
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  Announce(Op::kQuit, Impl::kBackend, 0, 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return 0;
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) { return dtensor::Main(argc, argv); }
