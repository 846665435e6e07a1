#ifndef DTENSOR_TENSOR_CUDA_GRAPH_H_
#define DTENSOR_TENSOR_CUDA_GRAPH_H_

#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/index_checks.h"

namespace dtensor {

// The work of a body of code on one CUDA device's stream, captured once as a
// CUDA graph and replayed at the cost of one launch (the host runs the body's
// C++ once, not at every replay).
//
//   DT_ASSIGN_OR_RETURN(std::unique_ptr<CudaGraph> graph,
//       CudaGraph::Capture(device, [&]() -> absl::Status {
//         DT_ASSIGN_OR_RETURN(y, ops(x));  // Queued, not run.
//         return absl::OkStatus();
//       }));
//   copy new data into x (on the device); DT_RETURN_IF_ERROR(graph->Replay());
//
// A replay reads and writes the very buffers the capture saw: the tensors
// made outside the body (x) are read where they were, and those the body
// made (y) are rewritten in place. The body's device memory comes from a
// private pool of the device's caching allocator (CachingAllocator::
// BeginPool), so no other tensor gets those buffers while the graph lives;
// the pool goes back to the shared cache when the graph is destroyed. One
// graph per device at a time. The deferred index checks the body makes
// (dtensor/tensor/index_checks.h) run at every replay and are read as an
// eager op's are (at the next read of the host after the replay; a replay
// queued before that read rewrites the previous one's reports).
class CudaGraph {
 public:
  // Runs `body` with the work submitted to the stream of `device` captured
  // (cudaStreamCaptureModeThreadLocal: API calls that are unsafe during a
  // capture are refused on this thread), not run, and returns the graph of
  // that work, instantiated.
  // Requires: what the body makes lazily once (cuBLAS handles, constant
  // tables, optimizer state) exists already: run the body once eagerly
  // first. The body submits work to no other stream. Every tensor made
  // before the capture that the body reads or writes outlives the graph
  // (its buffer would otherwise serve other tensors while replays use it).
  // Capture, Replay and the destruction run on one thread (the index checks
  // are per thread).
  // Errors: FailedPrecondition when `device` is not a CUDA device, dtensor
  // was built without CUDA, a profiler scope is active on this thread (its
  // timed events cannot be captured) or another graph of the device lives;
  // reading the pending index checks (a host sync); inside the body, a copy to
  // or from the host or a wait for the device fails with FailedPrecondition
  // naming the capture (an upload would re-read a reused staging buffer at
  // every replay). When the body fails, the capture is ended and discarded
  // (the stream stays usable) and the body's error returned. Otherwise the
  // CUDA runtime's (an invalidated capture, instantiation).
  static absl::StatusOr<std::unique_ptr<CudaGraph>> Capture(
      Device device, const std::function<absl::Status()>& body);

  // Frees the graph and returns its pool to the shared cache (replays in
  // flight still finish first).
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Queues one run of the captured work on the device's stream (and its
  // index checks, to be read) and returns without waiting for it.
  // Errors: the CUDA runtime's.
  absl::Status Replay();

  Device device() const { return device_; }

 private:
  CudaGraph(Device device, cuda::CapturedGraph graph,
            CapturedIndexChecks checks)
      : device_(device), graph_(graph), checks_(std::move(checks)) {}

  Device device_;
  cuda::CapturedGraph graph_;
  CapturedIndexChecks checks_;
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_CUDA_GRAPH_H_
