#include "dtensor/parallel/trainer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
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

}  // namespace

OptimizerFactory AdamWFactory(const nn::AdamWOptions& options) {
  return [options](std::vector<DTensor> parameters)
             -> absl::StatusOr<std::unique_ptr<nn::Optimizer>> {
    return nn::AdamW::Create(std::move(parameters), options);
  };
}

Trainer::Trainer(std::shared_ptr<Runtime> runtime, DeviceMesh mesh,
                 std::vector<Placement> batch_sharding)
    : runtime_(std::move(runtime)),
      mesh_(std::move(mesh)),
      batch_sharding_(std::move(batch_sharding)),
      steps_(Tensor::Scalar(0, DType::kI64)) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    std::shared_ptr<Runtime> runtime, std::unique_ptr<nn::Module> model,
    const DeviceMesh& mesh, const Plan& plan, LossFunction loss,
    const OptimizerFactory& make_optimizer, const TrainerOptions& options) {
  if (model == nullptr || !loss || !make_optimizer) {
    return absl::InvalidArgumentError(
        "Trainer::Create: the model, loss and optimizer factory must be set");
  }
  std::unique_ptr<Trainer> trainer(
      new Trainer(runtime, mesh, BatchSharding(mesh, plan)));
  DT_RETURN_IF_ERROR(ParallelizeModule(*model, mesh, plan));
  if (!options.device.is_cpu() && !runtime->metadata_only()) {
    DT_RETURN_IF_ERROR(MoveToDevice(*model, options.device));
  }
  trainer->device_ = options.device;
  if (plan.context_parallel.has_value()) {
    DT_ASSIGN_OR_RETURN(trainer->context_parallel_dim_,
                        ContextParallelDim(mesh, *plan.context_parallel));
    trainer->context_parallel_ = plan.context_parallel;
  }
  trainer->model_ = std::move(model);
  trainer->loss_ = std::move(loss);
  for (const nn::NamedSlot& named : trainer->model_->NamedParameters()) {
    trainer->parameters_.push_back(named.slot->value);
  }
  DT_ASSIGN_OR_RETURN(trainer->optimizer_,
                      make_optimizer(trainer->parameters_));
  trainer->buckets_ = std::make_unique<GradientBuckets>(
      trainer->parameters_, plan.bucket_bytes, plan.first_bucket_bytes,
      plan.mixed_precision ? plan.mixed_precision->reduce_dtype : std::nullopt);
  return trainer;
}

absl::StatusOr<DTensor> Trainer::Wrap(const Tensor& full, Shape shape,
                                      DType dtype) const {
  if (shape.empty()) {
    return absl::InvalidArgumentError(
        "training batch: a 0-d tensor has no batch dim to split");
  }
  std::vector<Placement> placements = batch_sharding_;
  if (context_parallel_dim_ >= 0 && shape.size() >= 2) {
    placements[context_parallel_dim_] = Placement::Shard(1);
  }
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(mesh_, placements, shape, dtype));
  if (runtime_->metadata_only()) return DTensor::FromSpec(runtime_, spec);
  DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(runtime_->rank()));
  Tensor local = full;
  for (int64_t d = 0; d < local.dim(); ++d) {
    DT_ASSIGN_OR_RETURN(local,
                        local.Narrow(d, block.offset[d], block.shape[d]));
  }
  FromLocalOptions from_local;
  from_local.global_shape = std::move(shape);
  DT_ASSIGN_OR_RETURN(Tensor on_device, local.Contiguous().To(device_));
  return DTensor::FromLocal(runtime_, std::move(on_device), mesh_, placements,
                            from_local);
}

absl::StatusOr<DTensor> Trainer::ShardBatch(const Tensor& full) const {
  if (context_parallel_.has_value() && full.dim() >= 2) {
    // The sequence in the order ring attention expects (a loss that is a
    // mean or sum over positions does not see the order).
    DT_ASSIGN_OR_RETURN(
        const Tensor ordered,
        ContextParallelBatch(full, mesh_.size(context_parallel_dim_),
                             *context_parallel_));
    return Wrap(ordered, ordered.shape(), ordered.dtype());
  }
  return Wrap(full, full.shape(), full.dtype());
}

absl::StatusOr<DTensor> Trainer::ShardBatchMetadata(const Shape& shape,
                                                    DType dtype) const {
  if (!runtime_->metadata_only()) {
    return absl::FailedPreconditionError(
        "ShardBatchMetadata needs a metadata-only runtime");
  }
  return Wrap(Tensor(), shape, dtype);
}

absl::StatusOr<DTensor> Trainer::Forward(const DTensor& input,
                                         const DTensor& target) {
  tape_.Clear();
  nn::GradientTape::Scope scope(tape_);
  DT_ASSIGN_OR_RETURN(DTensor output, (*model_)(input));
  return loss_(output, target);
}

absl::StatusOr<std::vector<DTensor>> Trainer::Backward(const DTensor& loss) {
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

absl::Status Trainer::Update(absl::Span<const DTensor> grads) {
  DT_RETURN_IF_ERROR(optimizer_->Step(grads));
  return nn::Assign(
      steps_,
      Tensor::Scalar(static_cast<double>(steps_taken() + 1), DType::kI64));
}

int64_t Trainer::steps_taken() const {
  return static_cast<int64_t>(steps_.Item().value_or(0));
}

absl::StatusOr<DTensor> Trainer::Step(const DTensor& input,
                                      const DTensor& target) {
  DT_ASSIGN_OR_RETURN(DTensor loss, Forward(input, target));
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, Backward(loss));
  DT_RETURN_IF_ERROR(Update(grads));
  return loss;
}

absl::StatusOr<DTensor> Trainer::StepCounted(const DTensor& input,
                                             const DTensor& target,
                                             PhaseComms& comms) {
  DTensor loss;
  std::vector<DTensor> grads;
  {
    CommCounter::Scope counting(comms.forward);
    DT_ASSIGN_OR_RETURN(loss, Forward(input, target));
  }
  {
    CommCounter::Scope counting(comms.backward);
    DT_ASSIGN_OR_RETURN(grads, Backward(loss));
  }
  CommCounter::Scope counting(comms.update);
  DT_RETURN_IF_ERROR(Update(grads));
  return loss;
}

}  // namespace parallel
}  // namespace dtensor
