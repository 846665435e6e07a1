#ifndef DTENSOR_TENSOR_CUDA_BACKEND_H_
#define DTENSOR_TENSOR_CUDA_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda/caching_allocator.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor::cuda {

// The CUDA side of the tensor layer. Built with --config=cuda these call the
// CUDA runtime; otherwise every call returns FailedPrecondition saying that
// dtensor was built without CUDA. With CUDA built in but no device present,
// calls return FailedPrecondition saying so.
//
// All work of a device runs in order on one stream per device (created on
// first use, non-blocking with respect to the legacy default stream): kernels,
// copies and cuBLAS calls. Device memory comes from one caching allocator per
// device whose blocks belong to that stream, so a freed block is reused only
// by work ordered after its last use. Copies to the host wait for the stream.

// True when dtensor was built with the CUDA backend.
bool BuiltWithCuda();
// What every CUDA call returns in a build without the CUDA backend (the
// stubs of cuda_backend_stub.cc, and the CUDA entry points of the op
// families: cuda_entry.h).
inline absl::Status NotBuilt() {
  return absl::FailedPreconditionError(
      "dtensor was built without CUDA (build with --config=cuda)");
}
// Number of visible CUDA devices (0 without CUDA or without a device).
int DeviceCount();
// "built without CUDA", "no CUDA device", or a device description.
std::string Describe();

// Device memory from the device's caching allocator.
absl::StatusOr<void*> Malloc(size_t nbytes, int device);
void Free(void* ptr, int device);
// The device's allocator statistics (all zero without CUDA or before the
// first allocation).
MemoryStats GetMemoryStats(int device);
// Returns the device's cached free blocks to cudaFree.
absl::Status EmptyCache(int device);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
// Ordered on the device's stream; returns once the host buffer may be reused
// (host-to-device) or holds the data (device-to-host). A host-to-device copy
// of at most UploadStaging::kMaxBytes goes through a page-locked staging
// buffer and returns without waiting for the device (not a host sync).
absl::Status Memcpy(void* dst, const void* src, size_t nbytes, CopyKind kind,
                    int device);
// Starts a copy of `nbytes` from device memory `src` to page-locked host
// memory `dst` (MallocPinned), ordered on the device's stream, and returns
// at once: `dst` holds the data once the host has waited for the stream
// (Memcpy to the host, Synchronize). Not a host sync.
absl::Status CopyToPinnedAsync(void* dst, const void* src, size_t nbytes,
                               int device);
// Page-locked host memory, which CopyToPinnedAsync can fill without making
// the host wait. Slow to allocate, and freeing waits for the devices: for
// buffers kept for the life of the process.
absl::StatusOr<void*> MallocPinned(size_t nbytes);
// Sets the `count` elements of `element_bytes` (1, 2, 4 or 8) at `dst` to the
// low `element_bytes` bytes of `bits`, ordered on the device's stream.
absl::Status Fill(void* dst, size_t count, uint64_t bits, int element_bytes,
                  int device);

// The stream of `device` (a cudaStream_t), for the NCCL backend and the
// kernel launches: work submitted to it is ordered with every op of the
// device.
absl::StatusOr<void*> CurrentStream(int device);
// Waits until the device's stream has run everything submitted so far.
// Errors: FailedPrecondition while the stream is captured (below).
absl::Status Synchronize(int device);

// CUDA graph capture of the device's stream (dtensor/tensor/cuda_graph.h is
// the interface to use): an instantiated graph and the allocator pool
// (CachingAllocator::BeginPool) its memory comes from.
struct CapturedGraph {
  void* exec = nullptr;  // A cudaGraphExec_t.
  uint64_t pool = 0;
};
// Starts capturing the work this thread submits to the device's stream
// (cudaStreamCaptureModeThreadLocal), with a private allocator pool active on
// it. Until EndCapture, a Memcpy to or from the host, Synchronize and
// EmptyCache of the device fail with FailedPrecondition naming the capture
// (an upload's staging buffer would be re-read at every replay; a wait cannot
// be captured). Errors: FailedPrecondition when the device's stream is being
// captured already; the device's.
absl::Status BeginCapture(int device);
// Ends the capture begun by BeginCapture. With `keep`, returns the
// instantiated graph; without (the captured body failed), or when ending or
// instantiating fails, the graph and its pool are discarded (the stream is
// usable again either way), returning a null exec or the error.
absl::StatusOr<CapturedGraph> EndCapture(int device, bool keep);
// Launches `graph` (from EndCapture on `device`) on the device's stream.
absl::Status LaunchGraph(const CapturedGraph& graph, int device);
// Frees `graph` and releases its pool (launches already queued still run
// first: the pool's blocks are reused only by later work of the stream).
void DestroyGraph(const CapturedGraph& graph, int device);

// A CUDA event recorded on a device's stream: other streams (a communicator's)
// wait for it to order their work after the compute submitted so far.
class Event {
 public:
  // Records an event on the stream of `device`.
  static absl::StatusOr<Event> Record(int device);
  // The same, for an event that can time (the profiler's op spans; an
  // ordinary event skips the timestamp, which costs less).
  static absl::StatusOr<Event> RecordTimed(int device);
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  // Makes `stream` (a cudaStream_t) wait for the recorded work.
  absl::Status BlockStream(void* stream) const;
  // Waits on the host for the recorded work.
  absl::Status Wait() const;
  // Microseconds on the device from `start` to this event; waits on the host
  // for this event.
  // Requires: both were made by RecordTimed on one device, `start` first.
  // Errors: the device's.
  absl::StatusOr<double> ElapsedUsSince(const Event& start) const;

 private:
  Event(void* event, int device) : event_(event), device_(device) {}
  void* event_ = nullptr;
  int device_ = 0;
};

// C = A·B for row-major matrices, batched: C[i] (m x n, leading dim ldc) =
// op(A[i]) (m x k) · op(B[i]) (k x n), A[i] at a + i * stride_a elements,
// op(X) = X^T when trans_x (the operand is then stored k x m / n x k, with
// its own leading dim). A stride of 0 reuses one matrix for every batch.
// f32 accumulates in f32 (TF32 tensor cores only when allow_tf32), bf16 and
// f16 accumulate in f32, f64 in f64. Runs on cuBLAS with one handle and one
// workspace per device, on the device's stream.
struct GemmArgs {
  DType dtype = DType::kF32;
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  int64_t stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  int64_t stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t stride_c = 0;
  int64_t batch = 1;
  bool allow_tf32 = false;
};
absl::Status Gemm(const GemmArgs& args, int device);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_BACKEND_H_
