// Trains a small Llama-style model on the byte-level corpus shipped in
// examples/data, on in-process ranks, parallelized by a plan file.
//
//   ./bazelw run //examples:train_llama -- [--mesh dp=2,tp=2]
//       [--plan parallel/plans/tp_dp.json] [--steps 40] [--seed 0]
//       [--backend inprocess]
//
// Prints a progress line per step (loss, tokens/s) and, at the end, the
// collectives rank 0 issued, by kind and bytes.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "nn/autograd.h"
#include "nn/llama.h"
#include "nn/optim_adamw.h"
#include "ops/view_ops.h"
#include "ops/vocab_ops.h"
#include "parallel/parallelize.h"
#include "parallel/plan.h"
#include "tensor/status_macros.h"
#include "tools/arg_parser.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

constexpr char kCorpus[] = "examples/data/corpus.txt";

struct Options {
  std::string mesh = "dp=2,tp=2";
  std::string plan = "parallel/plans/tp_dp.json";
  int64_t steps = 40;
  uint64_t seed = 0;
  std::string backend = "inprocess";
  int64_t batch = 8;
  int64_t seq = 64;
};

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  constexpr FlagSpec kFlags[] = {{"mesh"}, {"plan"},    {"steps"},
                                 {"seed"}, {"backend"}, {"help", false}};
  DT_ASSIGN_OR_RETURN(ParsedArgs parsed, ParseArgs(args, kFlags));
  Options options;
  if (parsed.Has("help")) {
    return absl::CancelledError(
        "usage: train_llama [--mesh dp=2,tp=2] [--plan FILE] [--steps N] "
        "[--seed S] [--backend inprocess]");
  }
  options.mesh = parsed.ValueOr("mesh", options.mesh);
  options.plan = parsed.ValueOr("plan", options.plan);
  options.backend = parsed.ValueOr("backend", options.backend);
  if (!absl::SimpleAtoi(parsed.ValueOr("steps", "40"), &options.steps) ||
      options.steps < 1) {
    return absl::InvalidArgumentError("--steps needs a positive integer");
  }
  if (!absl::SimpleAtoi(parsed.ValueOr("seed", "0"), &options.seed)) {
    return absl::InvalidArgumentError("--seed needs a non-negative integer");
  }
  if (options.backend != "inprocess") {
    return absl::UnimplementedError(
        absl::StrCat("--backend ", options.backend,
                     ": this example runs on in-process ranks only so far"));
  }
  return options;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The model: a byte vocabulary and a few million parameters.
nn::LlamaConfig ModelConfig() {
  nn::LlamaConfig config;
  config.dim = 256;
  config.n_layers = 4;
  config.n_heads = 8;
  config.n_kv_heads = 4;
  config.vocab_size = 256;
  config.multiple_of = 64;
  config.max_seq_len = 128;
  return config;
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

// What rank 0 reports.
struct Report {
  std::mutex mu;
  CommCounter comms;
};

absl::Status TrainRank(ProcessGroups& groups, const Options& options,
                       const DeviceMesh& mesh, const parallel::Plan& plan,
                       const std::string& corpus, Report& report) {
  auto runtime = Runtime::ForRank(groups);
  nn::InitOptions init;
  init.seed = options.seed;
  DT_ASSIGN_OR_RETURN(auto model,
                      nn::BuildLlama(ModelConfig(), runtime, mesh, init));
  DT_RETURN_IF_ERROR(parallel::ParallelizeModule(*model, mesh, plan));
  std::vector<DTensor> params;
  for (const nn::NamedSlot& named : model->NamedParameters()) {
    params.push_back(named.slot->value);
  }
  nn::AdamWOptions adamw;
  adamw.learning_rate = 3e-3;
  DT_ASSIGN_OR_RETURN(auto optimizer, nn::AdamW::Create(params, adamw));

  // Data parallel over the "dp" dim when the mesh has one.
  std::vector<Placement> batch_layout(mesh.ndim(), Placement::Replicate());
  if (mesh.DimIndex("dp").ok())
    batch_layout[*mesh.DimIndex("dp")] = Placement::Shard(0);
  CommCounter comms;
  std::vector<int64_t> inputs, targets;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= options.steps; ++step) {
    MakeBatch(corpus, options, step, &inputs, &targets);
    DT_ASSIGN_OR_RETURN(
        Tensor input_full,
        Tensor::FromVector(inputs, {options.batch, options.seq}));
    DT_ASSIGN_OR_RETURN(
        Tensor target_full,
        Tensor::FromVector(targets, {options.batch * options.seq}));
    // Every rank holds the whole batch; FromLocal of its block needs no
    // communication.
    DT_ASSIGN_OR_RETURN(
        DTensorSpec spec,
        DTensorSpec::Create(mesh, batch_layout, {options.batch, options.seq},
                            DType::kI64));
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(groups.rank()));
    DT_ASSIGN_OR_RETURN(Tensor input_local,
                        input_full.Narrow(0, block.offset[0], block.shape[0]));
    DT_ASSIGN_OR_RETURN(Tensor target_local,
                        target_full.Narrow(0, block.offset[0] * options.seq,
                                           block.shape[0] * options.seq));
    FromLocalOptions input_options;
    input_options.global_shape = Shape{options.batch, options.seq};
    DT_ASSIGN_OR_RETURN(DTensor tokens,
                        DTensor::FromLocal(runtime, input_local.Contiguous(),
                                           mesh, batch_layout, input_options));
    FromLocalOptions target_options;
    target_options.global_shape = Shape{options.batch * options.seq};
    DT_ASSIGN_OR_RETURN(DTensor labels,
                        DTensor::FromLocal(runtime, target_local.Contiguous(),
                                           mesh, batch_layout, target_options));
    nn::GradientTape tape;
    DTensor loss;
    std::vector<DTensor> grads;
    {
      CommCounter::Scope comm_scope(comms);
      {
        nn::GradientTape::Scope tape_scope(tape);
        DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(tokens));
        DT_ASSIGN_OR_RETURN(logits,
                            ops::Reshape(logits, {options.batch * options.seq,
                                                  ModelConfig().vocab_size}));
        DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(logits, labels));
      }
      DT_ASSIGN_OR_RETURN(grads, tape.Gradient(loss, params));
      DT_RETURN_IF_ERROR(optimizer->Step(grads));
      DT_ASSIGN_OR_RETURN(Tensor loss_value, loss.FullTensor());
      if (groups.rank() == 0) {
        const double seconds = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
        const double tokens_per_s =
            static_cast<double>(step * options.batch * options.seq) / seconds;
        const int width = 30;
        const int done = static_cast<int>(width * step / options.steps);
        std::printf("\r[%s%s] step %3lld/%lld  loss %.4f  %.0f tokens/s",
                    std::string(done, '#').c_str(),
                    std::string(width - done, '.').c_str(),
                    static_cast<long long>(step),
                    static_cast<long long>(options.steps),
                    loss_value.Item().value_or(0), tokens_per_s);
        if (step == options.steps) std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  if (groups.rank() == 0) {
    std::lock_guard<std::mutex> lock(report.mu);
    report.comms = comms;
  }
  return absl::OkStatus();
}

void PrintCollectives(const CommCounter& comms, int64_t steps) {
  std::printf("\ncollectives issued by rank 0 over %lld steps:\n",
              static_cast<long long>(steps));
  std::printf("  %-16s %8s %16s\n", "kind", "count", "bytes received");
  for (CommKind kind :
       {CommKind::kAllGather, CommKind::kAllReduce, CommKind::kReduceScatter,
        CommKind::kAllToAll, CommKind::kPermute}) {
    std::printf("  %-16s %8lld %16.0f\n",
                std::string(CommKindName(kind)).c_str(),
                static_cast<long long>(comms.count(kind)), comms.bytes(kind));
  }
  std::printf("  %-16s %8lld %16.0f\n", "total",
              static_cast<long long>(comms.total_collectives()),
              comms.total_bytes());
}

absl::Status Main(const std::vector<std::string>& args) {
  DT_ASSIGN_OR_RETURN(Options options, ParseOptions(args));
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag(options.mesh));
  DT_ASSIGN_OR_RETURN(parallel::Plan plan,
                      parallel::LoadPlanFile(options.plan));
  DT_ASSIGN_OR_RETURN(std::string corpus, ReadFile(kCorpus));
  DT_ASSIGN_OR_RETURN(auto shape_only, nn::Transformer::Create(ModelConfig()));
  std::printf(
      "training a %.2fM-parameter Llama on %zu bytes of text, mesh %s, "
      "plan %s\n",
      static_cast<double>(shape_only->NumParameters()) / 1e6, corpus.size(),
      mesh.ToString().c_str(), options.plan.c_str());
  Report report;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) {
    return TrainRank(groups, options, mesh, plan, corpus, report);
  }));
  PrintCollectives(report.comms, options.steps);
  return absl::OkStatus();
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
