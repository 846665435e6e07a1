#ifndef DTENSOR_PARALLEL_LLAMA_TRAINER_H_
#define DTENSOR_PARALLEL_LLAMA_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/nn/state_dict.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/parallel/trainer.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/cuda_graph.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace parallel {

struct LlamaTrainerOptions {
  nn::LlamaConfig config;
  // Initial values depend only on the seed and each parameter's name
  // (dtensor/nn/init.h), so every mesh and plan starts from the same model.
  uint64_t seed = 0;
  DType dtype = DType::kF32;
  nn::AdamWOptions adamw;
  // Where this rank's parameters, optimizer state and batches live (a CUDA
  // device: the ops run its kernels). Initial values are computed on the CPU
  // and copied, so every device starts from the same model.
  Device device = Device::CPU();
};

// One rank's share of training a Llama model (dtensor/nn/llama.h) parallelized
// by a plan: the model, its AdamW optimizer and the training step, shared by
// the example, the equivalence tests and `dtensor explain`; a Trainer
// (dtensor/parallel/trainer.h) of the model and its next-token loss. The
// batch is split on dim 0 over the plan's dp dim when the mesh has one, else
// replicated.
// Every rank of the mesh calls every method (SPMD). Under a metadata-only
// runtime the same calls run without data and only count communication.
class LlamaTrainer {
 public:
  // Builds and initializes the model on `mesh`, applies `plan`
  // (ParallelizeModule) and creates the optimizer. Errors: an invalid
  // config, those of ParallelizeModule and AdamW::Create.
  static absl::StatusOr<std::unique_ptr<LlamaTrainer>> Create(
      std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh,
      const Plan& plan, const LlamaTrainerOptions& options);

  // The batch as DTensors: `tokens` [batch, seq] and next-token `targets`
  // [batch, seq], int64, the whole batch on every rank; each rank keeps its
  // block. Errors: shapes or dtypes that disagree or exceed the config.
  struct Batch {
    DTensor tokens;   // [batch, seq], batch split over dp.
    DTensor targets;  // [batch, seq], split over dp alike.
  };
  absl::StatusOr<Batch> MakeBatch(const Tensor& tokens,
                                  const Tensor& targets) const;
  // A batch of the given shape without data (metadata-only runtimes).
  absl::StatusOr<Batch> MakeBatchMetadata(int64_t batch, int64_t seq) const;

  // The phases of one step, for callers that observe each (explain):
  // Forward records the mean cross-entropy loss on a fresh tape (under an
  // ops::LossParallelScope when the plan has a loss_parallel entry, so the
  // vocab-sharded logits are never gathered); Backward
  // takes the gradients of every parameter (in their shardings: unless the
  // plan's dp is fsdp, the gradients that are Partial where their parameter
  // is Replicate, data-parallel and norm weights, are all-reduced in
  // buckets of the plan's bucket_mb while backward goes on,
  // dtensor/parallel/gradient_buckets.h); Update
  // applies them. Step runs the three and returns the loss (Replicate).
  absl::StatusOr<DTensor> Forward(const Batch& batch);
  absl::StatusOr<std::vector<DTensor>> Backward(const DTensor& loss);
  absl::Status Update(absl::Span<const DTensor> grads);
  absl::StatusOr<DTensor> Step(const Batch& batch);
  // Step, counting each phase's collectives on this rank in its own counter.
  using PhaseComms = Trainer::PhaseComms;
  absl::StatusOr<DTensor> StepCounted(const Batch& batch, PhaseComms& comms);

  // CUDA graphs of the step (dtensor/tensor/cuda_graph.h): CaptureStep
  // captures Forward and Backward of `example` on the trainer's CUDA device
  // as one graph, over the trainer's own copy of the batch, and runs it once
  // (its gradients are not applied). ReplayStep then copies a batch of the
  // same shape into that copy (device-to-device, outside the graph),
  // replays the graph, applies the gradients with Update (eagerly: the
  // optimizer's per-step constants and step counts stay on the host) and
  // returns the loss: a Step at the cost of a launch and the update. The
  // returned loss (and the gradients) are the graph's, rewritten by the next
  // replay. The deferred index checks (dtensor/tensor/index_checks.h) of a
  // replay are read at the next read of the host, as a Step's are, unless
  // another replay is queued first (then that one's are). Requires: both,
  // and the trainer's destruction, on the thread that created the trainer's
  // device work (the checks are per thread).
  // CaptureStep's errors: FailedPrecondition unless the runtime has data,
  // the mesh has one rank, the device is CUDA, a step was taken eagerly
  // (it makes what a capture cannot: the cuBLAS handle, the constant tables,
  // the optimizer state), no step is captured yet and no profiler scope is
  // active; InvalidArgument for a batch not on the device; what the capture
  // reports (a host copy or wait inside the step names the capture). A
  // failed capture leaves the trainer as it was.
  absl::Status CaptureStep(const Batch& example);
  // Errors: FailedPrecondition before CaptureStep; InvalidArgument for a
  // batch whose shape, dtype or device differs from the captured one's
  // (naming both); Update's.
  absl::StatusOr<DTensor> ReplayStep(const Batch& batch);
  bool step_captured() const { return graph_ != nullptr; }

  // The steps Update has taken (or a loaded checkpoint says were taken).
  int64_t steps_taken() const;
  // Everything a checkpoint needs to resume training (dtensor/parallel/
  // checkpoint.h): "model.<fqn>" for every parameter and buffer,
  // "optimizer.<fqn>.exp_avg", ".exp_avg_sq" and ".step" (AdamW::State),
  // and "trainer.steps" (0-d int64, replicated). The DTensors share storage
  // with the trainer, so loading a checkpoint into them restores it, on any
  // mesh and plan. Materializes the optimizer state.
  absl::StatusOr<nn::StateDict> State();

  nn::Transformer& model() { return *model_; }
  nn::AdamW& optimizer() { return *optimizer_; }
  // The parameters, in the model's order (NamedParameters).
  const std::vector<DTensor>& parameters() const {
    return trainer_->parameters();
  }
  const DeviceMesh& mesh() const { return trainer_->mesh(); }

 private:
  LlamaTrainer() = default;

  // ReplayStep's checks of `batch` against the captured one.
  absl::Status CheckReplayBatch(const Batch& batch) const;

  std::unique_ptr<Trainer> trainer_;
  // The trainer's model and optimizer, as their types.
  nn::Transformer* model_ = nullptr;
  nn::AdamW* optimizer_ = nullptr;
  Device device_ = Device::CPU();
  // Whether Step, StepCounted or Update ran on this trainer (CaptureStep's
  // precondition: they make what a capture cannot).
  bool stepped_eagerly_ = false;
  // The captured step (CaptureStep): the graph, its batch (refilled by
  // ReplayStep), its loss and gradients (rewritten by each replay).
  std::unique_ptr<CudaGraph> graph_;
  Batch captured_batch_;
  DTensor captured_loss_;
  std::vector<DTensor> captured_grads_;
};

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_LLAMA_TRAINER_H_
