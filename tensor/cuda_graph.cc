#include "dtensor/tensor/cuda_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::StatusOr<std::unique_ptr<CudaGraph>> CudaGraph::Capture(
    Device device, const std::function<absl::Status()>& body) {
  if (!device.is_cuda()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CudaGraph::Capture: device ", device.ToString(),
                     " is not a CUDA device"));
  }
  if (Profiler::Active()) {
    return absl::FailedPreconditionError(
        "CudaGraph::Capture: a profiler scope is active on this thread (its "
        "timed events cannot be captured)");
  }
  // Before the capture: what the index checks make lazily (pinned report
  // slots, device words) cannot be made inside it.
  DT_RETURN_IF_ERROR(CapturedIndexChecks::PrepareCapture(device));
  DT_RETURN_IF_ERROR(cuda::BeginCapture(device.index));
  const absl::Status ran = body();
  absl::StatusOr<cuda::CapturedGraph> graph =
      cuda::EndCapture(device.index, /*keep=*/ran.ok());
  // Taken either way: a failed capture's checks never ran.
  CapturedIndexChecks checks = CapturedIndexChecks::TakeCaptured();
  DT_RETURN_IF_ERROR(ran);
  DT_RETURN_IF_ERROR(graph.status());
  return std::unique_ptr<CudaGraph>(
      new CudaGraph(device, *graph, std::move(checks)));
}

CudaGraph::~CudaGraph() { cuda::DestroyGraph(graph_, device_.index); }

absl::Status CudaGraph::Replay() {
  DT_RETURN_IF_ERROR(cuda::LaunchGraph(graph_, device_.index));
  checks_.Requeue();
  return absl::OkStatus();
}

}  // namespace dtensor
