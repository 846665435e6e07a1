#include "bench/tp_step_model.h"

#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/tensor/generator.h"

namespace dtensor::bench {
namespace {

// Megatron's block plan on a tp-only mesh: the layer entries of
// parallel/plans/tp_dp.json (which also shards the embedding and the
// output projection by vocabulary; the hand-written step keeps those
// replicated).
constexpr char kTpPlan[] = R"({
  "tp": {
    "layers.*.attention.wq": "colwise",
    "layers.*.attention.wk": "colwise",
    "layers.*.attention.wv": "colwise",
    "layers.*.attention.wo": "rowwise",
    "layers.*.feed_forward.w1": "colwise",
    "layers.*.feed_forward.w3": "colwise",
    "layers.*.feed_forward.w2": "rowwise"
  },
  "dp": "none"
})";

}  // namespace

nn::LlamaConfig ModelConfig() {
  nn::LlamaConfig config;
  config.dim = 256;
  config.n_layers = 2;
  config.n_heads = 8;
  config.n_kv_heads = 4;
  config.vocab_size = 256;
  config.multiple_of = 64;
  config.max_seq_len = kSeq;
  return config;
}

absl::StatusOr<Batch> MakeBatch() {
  Generator generator(kSeed);
  const int64_t vocab = ModelConfig().vocab_size;
  std::vector<int64_t> stream(kBatch * (kSeq + 1));
  for (int64_t& token : stream) token = generator.NextU32() % vocab;
  std::vector<int64_t> tokens, targets;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t i = 0; i < kSeq; ++i) {
      tokens.push_back(stream[b * (kSeq + 1) + i]);
      targets.push_back(stream[b * (kSeq + 1) + i + 1]);
    }
  }
  Batch batch;
  DT_ASSIGN_OR_RETURN(batch.tokens, Tensor::FromVector(tokens, {kBatch, kSeq}));
  DT_ASSIGN_OR_RETURN(batch.targets,
                      Tensor::FromVector(targets, {kBatch * kSeq}));
  return batch;
}

absl::StatusOr<DeviceMesh> TpMesh() {
  return DeviceMesh::Create({kRanks}, {"tp"});
}

absl::StatusOr<std::unique_ptr<DTensorTrainer>> DTensorTrainer::Create(
    ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, TpMesh());
  std::unique_ptr<DTensorTrainer> trainer(
      new DTensorTrainer(Runtime::ForRank(groups), std::move(mesh)));
  nn::InitOptions init;
  init.seed = kSeed;
  DT_ASSIGN_OR_RETURN(
      trainer->model_,
      nn::BuildLlama(ModelConfig(), trainer->runtime_, trainer->mesh_, init));
  DT_ASSIGN_OR_RETURN(parallel::Plan plan, parallel::ParsePlan(kTpPlan));
  DT_RETURN_IF_ERROR(
      parallel::ParallelizeModule(*trainer->model_, trainer->mesh_, plan));
  for (const nn::NamedSlot& named : trainer->model_->NamedParameters()) {
    trainer->names_.push_back(named.name);
    trainer->params_.push_back(named.slot->value);
  }
  nn::AdamWOptions adamw;
  adamw.learning_rate = kLearningRate;
  DT_ASSIGN_OR_RETURN(trainer->optimizer_,
                      nn::AdamW::Create(trainer->params_, adamw));
  DT_ASSIGN_OR_RETURN(Batch batch, MakeBatch());
  const std::vector<Placement> replicate = {Placement::Replicate()};
  DT_ASSIGN_OR_RETURN(trainer->tokens_,
                      DTensor::FromLocal(trainer->runtime_, batch.tokens,
                                         trainer->mesh_, replicate));
  DT_ASSIGN_OR_RETURN(trainer->targets_,
                      DTensor::FromLocal(trainer->runtime_, batch.targets,
                                         trainer->mesh_, replicate));
  return trainer;
}

absl::Status DTensorTrainer::Step() {
  nn::GradientTape tape;
  {
    nn::GradientTape::Scope scope(tape);
    DT_ASSIGN_OR_RETURN(DTensor logits, (*model_)(tokens_));
    DT_ASSIGN_OR_RETURN(
        logits,
        ops::Reshape(logits, {kBatch * kSeq, ModelConfig().vocab_size}));
    DT_ASSIGN_OR_RETURN(loss_, ops::CrossEntropy(logits, targets_));
  }
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                      tape.Gradient(loss_, params_));
  return optimizer_->Step(grads);
}

std::vector<Tensor> DTensorTrainer::LocalParams() const {
  std::vector<Tensor> locals;
  for (const DTensor& p : params_) locals.push_back(p.ToLocal());
  return locals;
}

}  // namespace dtensor::bench
