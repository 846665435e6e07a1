// Trains a small Llama-style model on the byte-level corpus shipped in
// examples/data, on in-process ranks, parallelized by a plan file.
//
//   ./bazelw run //examples:train_llama -- [--mesh dp=2,tp=2]
//       [--plan parallel/plans/tp_dp.json] [--steps 40] [--seed 0]
//       [--backend inprocess]
//   bazel-bin/tools/dtrun --nproc 4 -- bazel-bin/examples/train_llama
//       --backend gloo          (one process per rank, over TCP)
//   ... --device cuda [--mesh dp=1 --plan bench/peer/empty.json]
//       (in-process ranks share GPU 0, their collectives staged through the
//       host; under dtrun with --backend nccl, a GPU per rank)
//   [--batch 8] [--seq 64] [--dtype f32|bf16] set the step's shape and the
//   parameters' dtype; [--mixed-precision bf16] keeps f32 parameters and
//   computes in bf16 (docs/parallel.md, "Mixed precision").
//   [--activation-checkpoint full|selective] checkpoints every block
//   ("layers.*"; the plan's "activation_checkpoint", docs/parallel.md).
//   [--context-parallel balanced|contiguous] shards the sequence over the
//   mesh's "cp" dim, attention as ring attention (the plan's
//   "context_parallel", docs/parallel.md).
//   [--profile] profiles the steps after the first (warm-up) and prints rank
//   0's table of op times and every rank's collective wait at the end;
//   [--profile-trace FILE] also writes them as a Chrome trace (implies
//   --profile; docs/profiling.md).
//   [--cuda-graph] (--device cuda, one rank) runs the first step eagerly,
//   captures the forward and backward of the second as a CUDA graph and
//   replays it from then on, the optimizer step eager
//   (LlamaTrainer::CaptureStep; docs/building.md, "CUDA graphs").
//
// Prints a progress line per step (loss, cumulative tokens/s) and, at the
// end, the steady state (median step time after two warm-up steps, its
// tokens/s, the GPU's peak memory) and the collectives rank 0 issued, by kind
// and bytes.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/base/text_file.h"
#include "dtensor/collectives/backend_registry.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/nn/state_dict.h"
#include "dtensor/parallel/checkpoint.h"
#include "dtensor/parallel/context_parallel.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/tensor.h"
#include "examples/step_times.h"
#include "examples/train_profile.h"
#include "tools/arg_parser.h"
#include "tools/backend_flag.h"
#include "tools/explain_config.h"
#include "tools/mesh_flag.h"
#include "tools/user_path.h"

namespace dtensor {
namespace {

constexpr char kCorpus[] = "examples/data/corpus.txt";

struct Options {
  // A shipped model config (dtensor/nn/configs/) or a JSON file: "tiny" has a
  // byte vocabulary and a few million parameters.
  std::string config = "tiny";
  nn::LlamaConfig model;
  std::string mesh = "dp=2,tp=2";
  std::string plan = "parallel/plans/tp_dp.json";
  int64_t steps = 40;
  uint64_t seed = 0;
  // What --backend names (default inprocess; tools/backend_flag.h).
  BackendDef backend;
  // "cpu" or "cuda": where parameters, optimizer state and batches live.
  std::string device = "cpu";
  DType dtype = DType::kF32;
  // --mixed-precision: replaces the plan's policy.
  std::optional<parallel::MixedPrecisionPolicy> mixed_precision;
  // Checkpoint directories (empty: none): resume from one before training,
  // save to one after the last step.
  std::string save;
  std::string resume;
  int64_t batch = 8;
  int64_t seq = 64;
  // The deadline of every collective (DefaultCollectiveDeadline): how long
  // the other ranks wait for a rank that died or stopped.
  absl::Duration deadline = DefaultCollectiveDeadline();
  // --profile, and --profile-trace's file (empty: no trace).
  bool profile = false;
  std::string profile_trace;
  // --activation-checkpoint's mode (empty: the plan's choice).
  std::string activation_checkpoint;
  // --context-parallel: over the mesh's "cp" dim in that order.
  std::optional<parallel::ContextParallelPlan> context_parallel;
  // --cuda-graph: the steps after the first replay a captured graph.
  bool cuda_graph = false;
};

// --mixed-precision DTYPE: torchtitan's policy, computing in DTYPE over f32
// parameters (parallel::ComputeIn).
absl::Status ParseMixedPrecision(const ParsedArgs& parsed, Options& options) {
  if (!parsed.Has("mixed-precision")) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(
      const DType compute,
      parallel::ParseMixedPrecisionDType(
          "--mixed-precision", parsed.ValueOr("mixed-precision", "")));
  if (options.dtype != DType::kF32) {
    return absl::InvalidArgumentError(
        "--mixed-precision keeps the parameters in f32: drop --dtype bf16");
  }
  options.mixed_precision = parallel::ComputeIn(compute);
  return absl::OkStatus();
}

// The flags that change the plan: --mixed-precision, --activation-checkpoint
// (its mode is checked when the plan is applied) and --context-parallel.
absl::Status ParsePlanFlags(const ParsedArgs& parsed, Options& options) {
  DT_RETURN_IF_ERROR(ParseMixedPrecision(parsed, options));
  options.activation_checkpoint = parsed.ValueOr("activation-checkpoint", "");
  if (!parsed.Has("context-parallel")) return absl::OkStatus();
  const std::string order = parsed.ValueOr("context-parallel", "");
  if (order != "balanced" && order != "contiguous") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--context-parallel ", order, ": expected balanced or contiguous"));
  }
  options.context_parallel = parallel::ContextParallelPlan{
      "cp", order == "balanced" ? ops::SequenceOrder::kBalanced
                                : ops::SequenceOrder::kContiguous};
  return absl::OkStatus();
}

// --steps, --seed and --deadline.
absl::Status ParseRunLength(const ParsedArgs& parsed, Options& options) {
  if (!absl::SimpleAtoi(parsed.ValueOr("steps", "40"), &options.steps) ||
      options.steps < 1) {
    return absl::InvalidArgumentError("--steps needs a positive integer");
  }
  if (!absl::SimpleAtoi(parsed.ValueOr("seed", "0"), &options.seed)) {
    return absl::InvalidArgumentError("--seed needs a non-negative integer");
  }
  if (parsed.Has("deadline")) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(parsed.ValueOr("deadline", ""), &seconds) ||
        seconds < 1) {
      return absl::InvalidArgumentError(
          "--deadline needs a positive number of seconds");
    }
    options.deadline = absl::Seconds(seconds);
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  // clang-format off
  constexpr FlagSpec kFlags[] = {
      {"config"},        {"mesh"},           {"plan"},
      {"steps"},         {"seed"},           {"backend"},
      {"device"},        {"dtype"},          {"batch"},
      {"seq"},           {"save"},           {"resume"},
      {"deadline"},      {"help", false},    {"profile", false},
      {"profile-trace"}, {"mixed-precision"}, {"activation-checkpoint"},
      {"context-parallel"}, {"cuda-graph", false}};
  // clang-format on
  DT_ASSIGN_OR_RETURN(ParsedArgs parsed, ParseArgs(args, kFlags));
  Options options;
  if (parsed.Has("help")) {
    return absl::CancelledError(absl::StrCat(
        "usage: train_llama [--config tiny|FILE] [--mesh dp=2,tp=2] "
        "[--plan FILE] [--steps N] [--seed S] [--backend ",
        BackendFlagValues(),
        "] [--device cpu|cuda] "
        "[--dtype f32|bf16] [--batch B] [--seq S] [--save DIR] [--resume DIR] "
        "[--deadline SECONDS] [--profile] [--profile-trace FILE] "
        "[--mixed-precision bf16]\n"
        "[--activation-checkpoint full|selective] "
        "[--context-parallel balanced|contiguous] [--cuda-graph]\n"
        "--steps counts from the start of training: a run resumed at step k "
        "runs steps k+1..N"));
  }
  options.config = parsed.ValueOr("config", options.config);
  DT_ASSIGN_OR_RETURN(options.model, LoadLlamaConfig(options.config));
  for (auto [flag, value] :
       {std::pair{"batch", &options.batch}, std::pair{"seq", &options.seq}}) {
    if (parsed.Has(flag) &&
        (!absl::SimpleAtoi(parsed.ValueOr(flag, ""), value) || *value < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " needs a positive integer, got ",
                       parsed.ValueOr(flag, "")));
    }
  }
  if (options.seq > options.model.max_seq_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config ", options.config, ": max_seq_len ",
                     options.model.max_seq_len,
                     " is shorter than the training sequence ", options.seq));
  }
  options.mesh = parsed.ValueOr("mesh", options.mesh);
  options.plan = UserPath(parsed.ValueOr("plan", options.plan));
  options.save = UserPath(parsed.ValueOr("save", ""));
  options.resume = UserPath(parsed.ValueOr("resume", ""));
  DT_RETURN_IF_ERROR(ParseRunLength(parsed, options));
  options.profile_trace = UserPath(parsed.ValueOr("profile-trace", ""));
  options.profile = parsed.Has("profile") || !options.profile_trace.empty();
  options.device = parsed.ValueOr("device", options.device);
  if (options.device != "cpu" && options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", options.device, ": expected cpu or cuda"));
  }
  DT_ASSIGN_OR_RETURN(
      options.backend,
      ParseBackendFlag(
          parsed.ValueOr("backend", "inprocess"),
          options.device == "cpu" ? DeviceType::kCPU : DeviceType::kCUDA));
  const std::string dtype = parsed.ValueOr("dtype", "f32");
  if (dtype != "f32" && dtype != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype ", dtype, ": expected f32 or bf16"));
  }
  options.dtype = dtype == "bf16" ? DType::kBF16 : DType::kF32;
  options.cuda_graph = parsed.Has("cuda-graph");
  if (options.cuda_graph && options.device != "cuda") {
    return absl::InvalidArgumentError(
        "--cuda-graph captures a CUDA device's step: it needs --device cuda");
  }
  DT_RETURN_IF_ERROR(ParsePlanFlags(parsed, options));
  return options;
}

// The batch of `step`: `batch` windows of seq + 1 bytes at positions drawn
// from (seed, step), the same on every rank; inputs and next-byte targets.
void MakeBatch(const std::string& corpus, const Options& options, int64_t step,
               std::vector<int64_t>* inputs, std::vector<int64_t>* targets) {
  inputs->clear();
  targets->clear();
  Generator generator(options.seed, static_cast<uint64_t>(step) * 64);
  const uint64_t span = corpus.size() - options.seq - 1;
  for (int64_t b = 0; b < options.batch; ++b) {
    const uint64_t start = generator.NextU32() % span;
    for (int64_t i = 0; i < options.seq; ++i) {
      inputs->push_back(static_cast<unsigned char>(corpus[start + i]));
      targets->push_back(static_cast<unsigned char>(corpus[start + i + 1]));
    }
  }
}

// Tokens and targets of one step as [batch, seq] tensors.
absl::StatusOr<std::pair<Tensor, Tensor>> BatchTensors(
    const std::string& corpus, const Options& options, int64_t step) {
  std::vector<int64_t> inputs, targets;
  MakeBatch(corpus, options, step, &inputs, &targets);
  DT_ASSIGN_OR_RETURN(Tensor tokens,
                      Tensor::FromVector(inputs, {options.batch, options.seq}));
  DT_ASSIGN_OR_RETURN(
      Tensor next, Tensor::FromVector(targets, {options.batch, options.seq}));
  return std::make_pair(std::move(tokens), std::move(next));
}

// The progress bar rank 0 redraws after each step.
void PrintProgress(const Options& options, int64_t first, int64_t step,
                   double loss, double seconds) {
  const double tokens_per_s =
      static_cast<double>((step - first + 1) * options.batch * options.seq) /
      seconds;
  const int width = 30;
  const int done = static_cast<int>(width * step / options.steps);
  std::printf("\r[%s%s] step %3lld/%lld  loss %.4f  %.0f tokens/s",
              std::string(done, '#').c_str(),
              std::string(width - done, '.').c_str(),
              static_cast<long long>(step),
              static_cast<long long>(options.steps), loss, tokens_per_s);
  if (step == options.steps) std::printf("\n");
  std::fflush(stdout);
}

// What a rank's training did: the steps it ran (after a resumed step) and
// the collectives they issued (totals only: a counter of every event would
// grow with each step of a long run).
struct RankReport {
  int64_t steps = 0;
  CommCounter comms{CommCounter::Keep::kTotals};
  // With --profile.
  std::optional<RankProfile> profile;
  // The line of rank 0's step times (empty on other ranks).
  std::string step_summary;
};

// Trains on the rank `groups` belongs to.
absl::StatusOr<RankReport> TrainRank(ProcessGroups& groups,
                                     const Options& options,
                                     const DeviceMesh& mesh,
                                     const parallel::Plan& plan,
                                     const std::string& corpus, Device device) {
  parallel::LlamaTrainerOptions trainer_options;
  trainer_options.config = options.model;
  trainer_options.seed = options.seed;
  trainer_options.dtype = options.dtype;
  trainer_options.device = device;
  trainer_options.adamw.learning_rate = 3e-3;
  DT_ASSIGN_OR_RETURN(
      std::unique_ptr<parallel::LlamaTrainer> trainer,
      parallel::LlamaTrainer::Create(Runtime::ForRank(groups), mesh, plan,
                                     trainer_options));
  if (!options.resume.empty()) {
    DT_ASSIGN_OR_RETURN(nn::StateDict state, trainer->State());
    DT_RETURN_IF_ERROR(parallel::LoadCheckpoint(options.resume, state));
    if (groups.rank() == 0) {
      std::printf("resumed from %s after step %lld\n", options.resume.c_str(),
                  static_cast<long long>(trainer->steps_taken()));
    }
  }
  RankReport report;
  const auto start = std::chrono::steady_clock::now();
  const int64_t first = trainer->steps_taken() + 1;
  auto profiler = std::make_unique<Profiler>(groups.rank());
  StepTimes step_times;
  auto step_start = start;
  for (int64_t step = first; step <= options.steps; ++step) {
    DT_ASSIGN_OR_RETURN(auto tensors, BatchTensors(corpus, options, step));
    DT_ASSIGN_OR_RETURN(parallel::LlamaTrainer::Batch batch,
                        trainer->MakeBatch(tensors.first, tensors.second));
    // After an eager first step, outside the profiler (CaptureStep).
    if (options.cuda_graph && step == first + 1) {
      DT_RETURN_IF_ERROR(trainer->CaptureStep(batch));
    }
    CommCounter::Scope comm_scope(report.comms);
    // The first step warms up (allocator, propagation cache): not profiled.
    std::optional<Profiler::Scope> profile_scope;
    std::optional<Profiler::StepScope> profile_step;
    if (options.profile && step > first) {
      profile_scope.emplace(*profiler);
      profile_step.emplace(*profiler);
    }
    DT_ASSIGN_OR_RETURN(DTensor loss, trainer->step_captured()
                                          ? trainer->ReplayStep(batch)
                                          : trainer->Step(batch));
    profile_step.reset();
    profile_scope.reset();
    ++report.steps;
    DT_ASSIGN_OR_RETURN(Tensor loss_value, loss.FullTensor());
    if (groups.rank() == 0) {
      // Reading the loss waits for the device: the step's time ends here.
      const double loss_read = loss_value.Item().value_or(0);
      const auto now = std::chrono::steady_clock::now();
      step_times.Add(std::chrono::duration<double>(now - step_start).count());
      step_start = now;
      PrintProgress(options, first, step, loss_read,
                    std::chrono::duration<double>(now - start).count());
    }
  }
  // The first two steps warm up the allocator and the propagation caches.
  report.step_summary = step_times.Summary(first, /*warmup=*/2,
                                           options.batch * options.seq, device);
  if (options.profile) {
    DT_ASSIGN_OR_RETURN(report.profile,
                        FinishRankProfile(groups, std::move(profiler)));
  }
  if (!options.save.empty()) {
    DT_ASSIGN_OR_RETURN(nn::StateDict state, trainer->State());
    DT_RETURN_IF_ERROR(parallel::SaveCheckpoint(options.save, state));
    if (groups.rank() == 0) {
      std::printf("saved step %lld to %s\n",
                  static_cast<long long>(trainer->steps_taken()),
                  options.save.c_str());
    }
  }
  return report;
}

// The line rank 0 prints before training: the model's size, the data, the
// mesh and the plan.
absl::StatusOr<std::string> Header(const Options& options,
                                   const DeviceMesh& mesh,
                                   const std::string& corpus) {
  DT_ASSIGN_OR_RETURN(auto shape_only, nn::Transformer::Create(options.model));
  return absl::StrFormat(
      "training a %.2fM-parameter Llama on %zu bytes of text, mesh %s, "
      "plan %s\n",
      static_cast<double>(shape_only->NumParameters()) / 1e6, corpus.size(),
      mesh.ToString(), options.plan);
}

void PrintCollectives(const RankReport& report) {
  std::printf("\ncollectives issued by rank 0 over %lld steps:\n%s",
              static_cast<long long>(report.steps),
              report.comms.Summary().c_str());
}

// The device of ranks that share this process (RankLaunch::device): the
// CPU, or the first GPU.
absl::StatusOr<Device> SharedDevice(const Options& options) {
  if (options.device == "cpu") return Device::CPU();
  if (cuda::DeviceCount() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device cuda: no usable CUDA device (", cuda::Describe(), ")"));
  }
  return Device::CUDA(0);
}

// The device of a rank: the CPU, or the GPU of its communicators (the shared
// one in-process; the one NCCL chose from the local rank under dtrun).
absl::StatusOr<Device> RankDevice(const Options& options,
                                  ProcessGroups& groups) {
  if (options.device == "cpu") return Device::CPU();
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> world, groups.World());
  return world->device();
}

absl::Status Main(const std::vector<std::string>& args) {
  DT_ASSIGN_OR_RETURN(Options options, ParseOptions(args));
  SetDefaultCollectiveDeadline(options.deadline);
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag(options.mesh));
  if (options.cuda_graph && mesh.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cuda-graph captures one device's step: --mesh ", options.mesh,
        " has ", mesh.size(), " ranks (use one, e.g. --mesh dp=1)"));
  }
  DT_ASSIGN_OR_RETURN(parallel::Plan plan,
                      parallel::LoadPlanFile(options.plan));
  if (options.mixed_precision) plan.mixed_precision = options.mixed_precision;
  if (!options.activation_checkpoint.empty()) {
    plan.activation_checkpoint = {{"layers.*"}, options.activation_checkpoint};
  }
  if (options.context_parallel)
    plan.context_parallel = options.context_parallel;
  DT_ASSIGN_OR_RETURN(std::string corpus,
                      ReadTextFile(kCorpus, kMaxCorpusBytes));
  if (corpus.size() <= static_cast<size_t>(options.seq) + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kCorpus, " has ", corpus.size(),
                     " bytes; a sequence needs ", options.seq + 1));
  }
  DT_ASSIGN_OR_RETURN(const std::string header, Header(options, mesh, corpus));
  // In-process ranks are the mesh's; with --device cuda they share the GPU
  // and their collectives go through the host
  // (dtensor/collectives/host_staging.h): a layout demo, not a fast path.
  // dtrun with --backend nccl gives each rank a GPU.
  RankLaunch launch;
  launch.world_size = mesh.size();
  DT_ASSIGN_OR_RETURN(launch.device, SharedDevice(options));
  std::mutex mu;
  std::optional<RankReport> rank0;
  std::map<int64_t, RankProfile> profiles;
  DT_RETURN_IF_ERROR(
      options.backend.run(launch, [&](ProcessGroups& groups) -> absl::Status {
        if (groups.world_size() != mesh.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--mesh ", options.mesh, " has ", mesh.size(),
                           " ranks but dtrun started ", groups.world_size()));
        }
        if (groups.rank() == 0) std::printf("%s", header.c_str());
        DT_ASSIGN_OR_RETURN(const Device device, RankDevice(options, groups));
        DT_ASSIGN_OR_RETURN(RankReport report, TrainRank(groups, options, mesh,
                                                         plan, corpus, device));
        std::lock_guard<std::mutex> lock(mu);
        if (report.profile.has_value()) {
          profiles.emplace(groups.rank(), *std::move(report.profile));
        }
        if (groups.rank() == 0) rank0 = std::move(report);
        return absl::OkStatus();
      }));
  // Under dtrun only rank 0's process reports.
  if (rank0.has_value()) {
    std::printf("%s", rank0->step_summary.c_str());
    PrintCollectives(*rank0);
  }
  return ReportProfiles(profiles, options.profile_trace);
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  const absl::Status status =
      dtensor::Main(std::vector<std::string>(argv + 1, argv + argc));
  if (absl::IsCancelled(status)) {
    std::cout << status.message() << "\n";
    return 0;
  }
  if (!status.ok()) {
    std::cerr << "train_llama: " << status << "\n";
    return 1;
  }
  return 0;
}
