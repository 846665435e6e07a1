#include "dtensor/parallel/llama_trainer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/optim.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/parallel/parallelize.h"

namespace dtensor {
namespace parallel {
namespace {

// Dim 0 of the batch on the plan's dp dim when the mesh has it.
std::vector<Placement> BatchSharding(const DeviceMesh& mesh, const Plan& plan) {
  std::vector<Placement> placements(mesh.ndim(), Placement::Replicate());
  absl::StatusOr<int64_t> dp = mesh.DimIndex(plan.dp_dim);
  if (dp.ok()) placements[*dp] = Placement::Shard(0);
  return placements;
}

// Moves the local block of every parameter and buffer of `model` to `device`.
absl::Status MoveToDevice(nn::Module& model, Device device) {
  for (const nn::NamedSlot& named : model.NamedSlots()) {
    DTensor& value = named.slot->value;
    DT_ASSIGN_OR_RETURN(Tensor local, value.ToLocal().To(device));
    value = DTensor::WrapUnchecked(value.runtime(), value.spec_ptr(),
                                   std::move(local));
  }
  return absl::OkStatus();
}

bool HasLossParallel(const Plan& plan) {
  return std::any_of(plan.tp.begin(), plan.tp.end(), [](const PlanEntry& e) {
    return e.spec.style == Style::kLossParallel;
  });
}

}  // namespace

LlamaTrainer::LlamaTrainer(std::shared_ptr<Runtime> runtime, DeviceMesh mesh,
                           std::vector<Placement> batch_sharding)
    : runtime_(std::move(runtime)),
      mesh_(std::move(mesh)),
      batch_sharding_(std::move(batch_sharding)),
      steps_(Tensor::Scalar(0, DType::kI64)) {}

absl::StatusOr<std::unique_ptr<LlamaTrainer>> LlamaTrainer::Create(
    std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh, const Plan& plan,
    const LlamaTrainerOptions& options) {
  std::unique_ptr<LlamaTrainer> trainer(
      new LlamaTrainer(runtime, mesh, BatchSharding(mesh, plan)));
  nn::InitOptions init;
  init.seed = options.seed;
  init.dtype = options.dtype;
  DT_ASSIGN_OR_RETURN(trainer->model_,
                      nn::BuildLlama(options.config, runtime, mesh, init));
  DT_RETURN_IF_ERROR(ParallelizeModule(*trainer->model_, mesh, plan));
  if (!options.device.is_cpu() && !runtime->metadata_only()) {
    DT_RETURN_IF_ERROR(MoveToDevice(*trainer->model_, options.device));
  }
  trainer->device_ = options.device;
  trainer->loss_parallel_ = HasLossParallel(plan);
  for (const nn::NamedSlot& named : trainer->model_->NamedParameters()) {
    trainer->parameters_.push_back(named.slot->value);
  }
  DT_ASSIGN_OR_RETURN(trainer->optimizer_,
                      nn::AdamW::Create(trainer->parameters_, options.adamw));
  trainer->buckets_ = std::make_unique<GradientBuckets>(
      trainer->parameters_, plan.bucket_bytes, plan.first_bucket_bytes,
      plan.mixed_precision ? plan.mixed_precision->reduce_dtype : std::nullopt);
  return trainer;
}

absl::StatusOr<DTensor> LlamaTrainer::Wrap(const Tensor& full,
                                           Shape shape) const {
  DT_ASSIGN_OR_RETURN(
      DTensorSpec spec,
      DTensorSpec::Create(mesh_, batch_sharding_, shape, DType::kI64));
  if (runtime_->metadata_only()) return DTensor::FromSpec(runtime_, spec);
  DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(runtime_->rank()));
  DT_ASSIGN_OR_RETURN(Tensor local,
                      full.Narrow(0, block.offset[0], block.shape[0]));
  FromLocalOptions from_local;
  from_local.global_shape = std::move(shape);
  DT_ASSIGN_OR_RETURN(Tensor on_device, local.Contiguous().To(device_));
  return DTensor::FromLocal(runtime_, std::move(on_device), mesh_,
                            batch_sharding_, from_local);
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
  DT_ASSIGN_OR_RETURN(batch.tokens, Wrap(tokens, tokens.shape()));
  DT_ASSIGN_OR_RETURN(batch.targets, Wrap(targets, targets.shape()));
  return batch;
}

absl::StatusOr<LlamaTrainer::Batch> LlamaTrainer::MakeBatchMetadata(
    int64_t batch_size, int64_t seq) const {
  if (!runtime_->metadata_only()) {
    return absl::FailedPreconditionError(
        "MakeBatchMetadata needs a metadata-only runtime");
  }
  Batch batch;
  DT_ASSIGN_OR_RETURN(batch.tokens, Wrap(Tensor(), {batch_size, seq}));
  DT_ASSIGN_OR_RETURN(batch.targets, Wrap(Tensor(), {batch_size, seq}));
  return batch;
}

absl::StatusOr<DTensor> LlamaTrainer::Forward(const Batch& batch) {
  tape_.Clear();
  nn::GradientTape::Scope scope(tape_);
  DT_ASSIGN_OR_RETURN(DTensor logits, (*model_)(batch.tokens));
  const int64_t rows = logits.shape()[0] * logits.shape()[1];
  DT_ASSIGN_OR_RETURN(
      logits, ops::Reshape(logits, {rows, model_->config().vocab_size}));
  DT_ASSIGN_OR_RETURN(DTensor labels, ops::Reshape(batch.targets, {rows}));
  if (!loss_parallel_) return ops::CrossEntropy(logits, labels);
  ops::LossParallelScope loss_parallel;
  return ops::CrossEntropy(logits, labels);
}

absl::StatusOr<std::vector<DTensor>> LlamaTrainer::Backward(
    const DTensor& loss) {
  nn::GradientOptions options;
  options.keep_propagated_shardings = true;
  options.on_gradient_ready = buckets_->ReadyCallback();
  options.after_gradients_ready = buckets_->GroupReadyCallback();
  options.release_handed_over = true;
  const absl::Status backward =
      tape_.Gradient(loss, parameters_, options).status();
  tape_.Clear();
  if (!backward.ok()) {
    // The buckets in flight still need their waits; the open ones differ
    // between ranks that failed at different points and must not start.
    buckets_->Abandon().IgnoreError();
    return backward;
  }
  return buckets_->Finish();
}

absl::Status LlamaTrainer::Update(absl::Span<const DTensor> grads) {
  DT_RETURN_IF_ERROR(optimizer_->Step(grads));
  return nn::Assign(
      steps_,
      Tensor::Scalar(static_cast<double>(steps_taken() + 1), DType::kI64));
}

absl::StatusOr<DTensor> LlamaTrainer::StepCounted(const Batch& batch,
                                                  PhaseComms& comms) {
  DTensor loss;
  std::vector<DTensor> grads;
  {
    CommCounter::Scope counting(comms.forward);
    DT_ASSIGN_OR_RETURN(loss, Forward(batch));
  }
  {
    CommCounter::Scope counting(comms.backward);
    DT_ASSIGN_OR_RETURN(grads, Backward(loss));
  }
  CommCounter::Scope counting(comms.update);
  DT_RETURN_IF_ERROR(Update(grads));
  return loss;
}

int64_t LlamaTrainer::steps_taken() const {
  return static_cast<int64_t>(steps_.Item().value_or(0));
}

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
  DT_ASSIGN_OR_RETURN(
      state["trainer.steps"],
      DTensor::FromLocal(
          runtime_, runtime_->metadata_only() ? Tensor() : steps_, mesh_,
          std::vector<Placement>(mesh_.ndim(), Placement::Replicate()),
          scalar));
  return state;
}

absl::StatusOr<DTensor> LlamaTrainer::Step(const Batch& batch) {
  DT_ASSIGN_OR_RETURN(DTensor loss, Forward(batch));
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, Backward(loss));
  DT_RETURN_IF_ERROR(Update(grads));
  return loss;
}

}  // namespace parallel
}  // namespace dtensor
