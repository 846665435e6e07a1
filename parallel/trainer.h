#ifndef DTENSOR_PARALLEL_TRAINER_H_
#define DTENSOR_PARALLEL_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/module.h"
#include "dtensor/nn/optim.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/parallel/context_parallel.h"
#include "dtensor/parallel/gradient_buckets.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace parallel {

// The loss of a model's output against its target, recorded on the active
// tape: any nn::Loss (nn::MSELoss(), ...) or a function of ops.
using LossFunction = std::function<absl::StatusOr<DTensor>(
    const DTensor& output, const DTensor& target)>;
// Makes the optimizer of the parameters (in the model's order).
using OptimizerFactory =
    std::function<absl::StatusOr<std::unique_ptr<nn::Optimizer>>(
        std::vector<DTensor> parameters)>;
// An OptimizerFactory of AdamW with `options`.
OptimizerFactory AdamWFactory(const nn::AdamWOptions& options);

struct TrainerOptions {
  // Where the parameters, optimizer state and batches live (a CUDA device:
  // the ops run its kernels). The model is initialized where it is and its
  // local blocks copied here after the plan is applied.
  Device device = Device::CPU();
};

// One rank's share of training any nn::Module parallelized by a plan, as
// PyTorch's DDP / fully_shard wrappers with a training loop:
//
//   auto trainer = parallel::Trainer::Create(
//       runtime, std::move(model), mesh, plan, nn::MSELoss(),
//       parallel::AdamWFactory(adamw));
//   DT_ASSIGN_OR_RETURN(DTensor x, (*trainer)->ShardBatch(inputs));
//   DT_ASSIGN_OR_RETURN(DTensor y, (*trainer)->ShardBatch(targets));
//   DT_ASSIGN_OR_RETURN(DTensor loss, (*trainer)->Step(x, y));
//
// The plan is applied by ParallelizeModule (tensor parallel styles; "dp":
// "fsdp" installs FSDP groups with prefetched, grouped gathers,
// dtensor/parallel/fsdp.h). Backward hands every gradient to
// GradientBuckets (dtensor/parallel/gradient_buckets.h): the data-parallel
// gradients (Partial on dp where their parameter is Replicate) are
// all-reduced in buckets of the plan's bucket_bytes while backward goes on,
// FSDP's reduce-scattered per group, so that "dp": "replicate" issues one
// all-reduce per bucket rather than one per parameter. Batches are split on
// dim 0 over the plan's dp dim when the mesh has it, else replicated. Every
// rank of the mesh calls every method (SPMD). Under a metadata-only runtime
// the same calls run without data and only count communication.
class Trainer {
 public:
  // Takes `model`, initialized on `mesh` (nn::Initialize), applies `plan`,
  // moves it to options.device and makes its optimizer. Errors: those of
  // ParallelizeModule and of `make_optimizer`; a null model or loss.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      std::shared_ptr<Runtime> runtime, std::unique_ptr<nn::Module> model,
      const DeviceMesh& mesh, const Plan& plan, LossFunction loss,
      const OptimizerFactory& make_optimizer,
      const TrainerOptions& options = {});

  // `full` (the whole batch, on every rank) as a DTensor split on dim 0 over
  // the dp dim (and, with the plan's context parallelism, its sequence dim 1
  // put in the plan's order and split over the cp dim), this rank's block
  // copied to the trainer's device.
  // Errors: a 0-d tensor.
  absl::StatusOr<DTensor> ShardBatch(const Tensor& full) const;
  // A batch of `shape` and `dtype` without data (metadata-only runtimes).
  // Errors: a runtime with data, an empty shape.
  absl::StatusOr<DTensor> ShardBatchMetadata(const Shape& shape,
                                             DType dtype) const;

  // The phases of one step, for callers that observe each: Forward records
  // loss(model(input), target) on a fresh tape; Backward takes every
  // parameter's gradient in its parameter's sharding (bucketed and
  // overlapped as above); Update applies them with the optimizer. Step runs
  // the three and returns the loss.
  absl::StatusOr<DTensor> Forward(const DTensor& input, const DTensor& target);
  absl::StatusOr<std::vector<DTensor>> Backward(const DTensor& loss);
  absl::Status Update(absl::Span<const DTensor> grads);
  absl::StatusOr<DTensor> Step(const DTensor& input, const DTensor& target);
  // Step, counting each phase's collectives on this rank in its own counter.
  struct PhaseComms {
    CommCounter forward;
    CommCounter backward;
    CommCounter update;
  };
  absl::StatusOr<DTensor> StepCounted(const DTensor& input,
                                      const DTensor& target, PhaseComms& comms);

  // The steps Update has taken (or a loaded checkpoint says were taken).
  int64_t steps_taken() const;
  // 0-d int64 on the CPU holding steps_taken(), updated in place: a
  // checkpoint's state dict shares it. Metadata-only runtimes count in it too.
  const Tensor& steps_tensor() const { return steps_; }

  nn::Module& model() { return *model_; }
  nn::Optimizer& optimizer() { return *optimizer_; }
  // The parameters, in the model's order (NamedParameters).
  const std::vector<DTensor>& parameters() const { return parameters_; }
  const DeviceMesh& mesh() const { return mesh_; }
  const std::shared_ptr<Runtime>& runtime() const { return runtime_; }
  // The gradient sync (its collective count, micro-batch accumulation).
  GradientBuckets& buckets() { return *buckets_; }

 private:
  Trainer(std::shared_ptr<Runtime> runtime, DeviceMesh mesh,
          std::vector<Placement> batch_sharding);
  absl::StatusOr<DTensor> Wrap(const Tensor& full, Shape shape,
                               DType dtype) const;

  std::shared_ptr<Runtime> runtime_;
  DeviceMesh mesh_;
  std::vector<Placement> batch_sharding_;
  // With the plan's context parallelism: batches of 2 or more dims are put
  // in its order and split on dim 1 over this mesh dim (-1: none).
  std::optional<ContextParallelPlan> context_parallel_;
  int64_t context_parallel_dim_ = -1;
  Device device_ = Device::CPU();
  std::unique_ptr<nn::Module> model_;
  LossFunction loss_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::vector<DTensor> parameters_;
  nn::GradientTape tape_;
  // Backward's gradient sync: all-reduce buckets for replicated
  // parameters, reduce-scatter buckets for FSDP's.
  std::unique_ptr<GradientBuckets> buckets_;
  Tensor steps_;
};

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_TRAINER_H_
