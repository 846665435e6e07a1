// LlamaTrainer's CUDA graph of the step (CaptureStep, ReplayStep): the
// forward and backward captured as one graph, the update eager.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/tensor/cuda_backend.h"

namespace dtensor {
namespace parallel {
namespace {

std::string Describe(const DTensor& t) {
  const Tensor& local = t.ToLocal();
  return absl::StrCat(
      ShapeToString(t.shape()), " ", std::string(DTypeName(t.dtype())), " on ",
      local.defined() ? local.device().ToString() : "no device");
}

// `t`'s local block: defined and on `device`.
absl::Status CheckOnDevice(const DTensor& t, Device device, const char* what) {
  const Tensor& local = t.ToLocal();
  if (!local.defined() || local.device() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat("CaptureStep: the batch's ", what, " (", Describe(t),
                     ") must be on the trainer's device ", device.ToString()));
  }
  return absl::OkStatus();
}

// A copy of `t` with its own storage on its device (the graph's batch).
absl::StatusOr<DTensor> OwnCopy(const DTensor& t) {
  Tensor copy = t.ToLocal().Clone();
  if (!copy.defined()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "CaptureStep: no memory for a copy of the batch (", Describe(t), ")"));
  }
  return DTensor::WrapUnchecked(t.runtime(), t.spec_ptr(), std::move(copy));
}

}  // namespace

absl::Status LlamaTrainer::CaptureStep(const Batch& example) {
  if (trainer_->runtime()->metadata_only()) {
    return absl::FailedPreconditionError(
        "CaptureStep: a metadata-only runtime has no device work to capture");
  }
  if (mesh().size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CaptureStep: the mesh has ", mesh().size(),
        " ranks; a CUDA graph captures one device's work (one rank)"));
  }
  if (!device_.is_cuda()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CaptureStep: the trainer's device is ",
                     device_.ToString(), "; CUDA graphs need a CUDA device"));
  }
  if (!stepped_eagerly_) {
    return absl::FailedPreconditionError(
        "CaptureStep: no step was taken yet by this trainer (a resumed "
        "checkpoint's steps do not count); take one with Step first (it "
        "makes the cuBLAS handle, the constant tables and the optimizer "
        "state, which a capture cannot)");
  }
  if (graph_ != nullptr) {
    return absl::FailedPreconditionError(
        "CaptureStep: a step is captured already");
  }
  DT_RETURN_IF_ERROR(CheckOnDevice(example.tokens, device_, "tokens"));
  DT_RETURN_IF_ERROR(CheckOnDevice(example.targets, device_, "targets"));
  Batch batch;
  DT_ASSIGN_OR_RETURN(batch.tokens, OwnCopy(example.tokens));
  DT_ASSIGN_OR_RETURN(batch.targets, OwnCopy(example.targets));
  DTensor loss;
  std::vector<DTensor> grads;
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
      CudaGraph::Capture(device_, [&]() -> absl::Status {
        DT_ASSIGN_OR_RETURN(loss, Forward(batch));
        DT_ASSIGN_OR_RETURN(grads, Backward(loss));
        return absl::OkStatus();
      });
  DT_RETURN_IF_ERROR(graph.status());
  // One run on the example, waited for: a graph that cannot run fails here
  // rather than in the first ReplayStep, and its index checks are read.
  DT_RETURN_IF_ERROR((*graph)->Replay());
  DT_RETURN_IF_ERROR(cuda::Synchronize(device_.index));
  DT_RETURN_IF_ERROR(ReadDeferredIndexChecksAfterWait(device_));
  graph_ = *std::move(graph);
  captured_batch_ = std::move(batch);
  captured_loss_ = std::move(loss);
  captured_grads_ = std::move(grads);
  return absl::OkStatus();
}

absl::Status LlamaTrainer::CheckReplayBatch(const Batch& batch) const {
  const std::pair<const DTensor*, const DTensor*> pairs[] = {
      {&batch.tokens, &captured_batch_.tokens},
      {&batch.targets, &captured_batch_.targets}};
  for (const auto& [given, captured] : pairs) {
    const Tensor& local = given->ToLocal();
    const Tensor& into = captured->ToLocal();
    if (!local.defined() || given->shape() != captured->shape() ||
        given->dtype() != captured->dtype() || local.shape() != into.shape() ||
        local.device() != into.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReplayStep: the batch's ",
          given == &batch.tokens ? "tokens" : "targets", " (", Describe(*given),
          ") differ from the captured step's (", Describe(*captured), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DTensor> LlamaTrainer::ReplayStep(const Batch& batch) {
  if (graph_ == nullptr) {
    return absl::FailedPreconditionError(
        "ReplayStep: no step is captured (call CaptureStep first)");
  }
  DT_RETURN_IF_ERROR(CheckReplayBatch(batch));
  // Device-to-device copies on the device's stream, ordered before the
  // replay and after the previous replay's reads.
  Tensor tokens = captured_batch_.tokens.ToLocal();
  Tensor targets = captured_batch_.targets.ToLocal();
  DT_RETURN_IF_ERROR(tokens.CopyFrom(batch.tokens.ToLocal()));
  DT_RETURN_IF_ERROR(targets.CopyFrom(batch.targets.ToLocal()));
  DT_RETURN_IF_ERROR(graph_->Replay());
  DT_RETURN_IF_ERROR(Update(captured_grads_));
  return captured_loss_;
}

}  // namespace parallel
}  // namespace dtensor
