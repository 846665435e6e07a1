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
  DT_RETURN_IF_ERROR(cuda::BeginCapture(device.index));
  const absl::Status ran = body();
  absl::StatusOr<cuda::CapturedGraph> graph =
      cuda::EndCapture(device.index, /*keep=*/ran.ok());
  DT_RETURN_IF_ERROR(ran);
  DT_RETURN_IF_ERROR(graph.status());
  return std::unique_ptr<CudaGraph>(new CudaGraph(device, *graph));
}

CudaGraph::~CudaGraph() { cuda::DestroyGraph(graph_, device_.index); }

absl::Status CudaGraph::Replay() {
  return cuda::LaunchGraph(graph_, device_.index);
}

}  // namespace dtensor
