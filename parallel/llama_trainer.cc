#include "dtensor/parallel/llama_trainer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/optim.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/parallel/parallelize.h"

namespace dtensor {
namespace parallel {
namespace {

bool HasLossParallel(const Plan& plan) {
  return std::any_of(plan.tp.begin(), plan.tp.end(), [](const PlanEntry& e) {
    return e.spec.style == Style::kLossParallel;
  });
}

// The mean next-token cross entropy of logits [batch, seq, vocab] against
// targets [batch, seq], taken on the 3-D logits as they are: cross_entropy
// keeps any sharding of batch and sequence (dp and cp), so no view has to
// merge them (which would gather the sequence over cp). Under an
// ops::LossParallelScope when `loss_parallel`, so the vocab-sharded logits
// are never gathered either.
LossFunction NextTokenLoss(bool loss_parallel) {
  return [loss_parallel](const DTensor& logits,
                         const DTensor& targets) -> absl::StatusOr<DTensor> {
    if (!loss_parallel) return ops::CrossEntropy(logits, targets);
    ops::LossParallelScope scope;
    return ops::CrossEntropy(logits, targets);
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaTrainer>> LlamaTrainer::Create(
    std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh, const Plan& plan,
    const LlamaTrainerOptions& options) {
  std::unique_ptr<LlamaTrainer> trainer(new LlamaTrainer());
  nn::InitOptions init;
  init.seed = options.seed;
  init.dtype = options.dtype;
  DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::Transformer> model,
                      nn::BuildLlama(options.config, runtime, mesh, init));
  trainer->model_ = model.get();
  trainer->device_ = options.device;
  TrainerOptions trainer_options;
  trainer_options.device = options.device;
  const nn::AdamWOptions adamw = options.adamw;
  nn::AdamW** optimizer = &trainer->optimizer_;
  DT_ASSIGN_OR_RETURN(
      trainer->trainer_,
      Trainer::Create(
          runtime, std::move(model), mesh, plan,
          NextTokenLoss(HasLossParallel(plan)),
          [adamw, optimizer](std::vector<DTensor> parameters)
              -> absl::StatusOr<std::unique_ptr<nn::Optimizer>> {
            DT_ASSIGN_OR_RETURN(
                std::unique_ptr<nn::AdamW> made,
                nn::AdamW::Create(std::move(parameters), adamw));
            *optimizer = made.get();
            return made;
          },
          trainer_options));
  return trainer;
}

absl::StatusOr<LlamaTrainer::Batch> LlamaTrainer::MakeBatch(
    const Tensor& tokens, const Tensor& targets) const {
  if (tokens.dtype() != DType::kI64 || targets.dtype() != DType::kI64 ||
      tokens.dim() != 2 || tokens.shape() != targets.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training batch: tokens ", ShapeToString(tokens.shape()),
                     " ", std::string(DTypeName(tokens.dtype())),
                     " and targets ", ShapeToString(targets.shape()), " ",
                     std::string(DTypeName(targets.dtype())),
                     " must be int64 [batch, seq] of the same shape"));
  }
  if (tokens.size(1) > model_->config().max_seq_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("training batch: sequence length ", tokens.size(1),
                     " exceeds max_seq_len ", model_->config().max_seq_len));
  }
  Batch batch;
  DT_ASSIGN_OR_RETURN(batch.tokens, trainer_->ShardBatch(tokens));
  DT_ASSIGN_OR_RETURN(batch.targets, trainer_->ShardBatch(targets));
  return batch;
}

absl::StatusOr<LlamaTrainer::Batch> LlamaTrainer::MakeBatchMetadata(
    int64_t batch_size, int64_t seq) const {
  Batch batch;
  DT_ASSIGN_OR_RETURN(batch.tokens, trainer_->ShardBatchMetadata(
                                        {batch_size, seq}, DType::kI64));
  DT_ASSIGN_OR_RETURN(batch.targets, trainer_->ShardBatchMetadata(
                                         {batch_size, seq}, DType::kI64));
  return batch;
}

absl::StatusOr<DTensor> LlamaTrainer::Forward(const Batch& batch) {
  return trainer_->Forward(batch.tokens, batch.targets);
}

absl::StatusOr<std::vector<DTensor>> LlamaTrainer::Backward(
    const DTensor& loss) {
  return trainer_->Backward(loss);
}

absl::Status LlamaTrainer::Update(absl::Span<const DTensor> grads) {
  DT_RETURN_IF_ERROR(trainer_->Update(grads));
  stepped_eagerly_ = true;
  return absl::OkStatus();
}

absl::StatusOr<DTensor> LlamaTrainer::Step(const Batch& batch) {
  DT_ASSIGN_OR_RETURN(DTensor loss,
                      trainer_->Step(batch.tokens, batch.targets));
  stepped_eagerly_ = true;
  return loss;
}

absl::StatusOr<DTensor> LlamaTrainer::StepCounted(const Batch& batch,
                                                  PhaseComms& comms) {
  DT_ASSIGN_OR_RETURN(
      DTensor loss, trainer_->StepCounted(batch.tokens, batch.targets, comms));
  stepped_eagerly_ = true;
  return loss;
}

int64_t LlamaTrainer::steps_taken() const { return trainer_->steps_taken(); }

absl::StatusOr<nn::StateDict> LlamaTrainer::State() {
  nn::StateDict state;
  DT_ASSIGN_OR_RETURN(nn::StateDict model, nn::GetStateDict(*model_));
  std::vector<std::string> names;
  for (auto& [name, value] : model) state.emplace("model." + name, value);
  for (const nn::NamedSlot& named : model_->NamedParameters()) {
    names.push_back(named.name);
  }
  DT_ASSIGN_OR_RETURN(nn::StateDict optimizer, optimizer_->State(names));
  for (auto& [name, value] : optimizer) {
    state.emplace("optimizer." + name, value);
  }
  FromLocalOptions scalar;
  scalar.global_shape = Shape{};
  const std::shared_ptr<Runtime>& runtime = trainer_->runtime();
  const DeviceMesh& mesh = trainer_->mesh();
  DT_ASSIGN_OR_RETURN(
      state["trainer.steps"],
      DTensor::FromLocal(
          runtime,
          runtime->metadata_only() ? Tensor() : trainer_->steps_tensor(), mesh,
          std::vector<Placement>(mesh.ndim(), Placement::Replicate()), scalar));
  return state;
}

}  // namespace parallel
}  // namespace dtensor
