#ifndef DTENSOR_COLLECTIVES_NCCL_NCCL_CHANNEL_H_
#define DTENSOR_COLLECTIVES_NCCL_NCCL_CHANNEL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dtensor/base/mutex.h"

namespace dtensor {

// The status of a CUDA runtime or NCCL result; `what` names the call.
absl::Status FromCuda(cudaError_t error, absl::string_view what);
absl::Status FromNccl(ncclResult_t result, absl::string_view what);

// One NCCL communicator and the CUDA stream its operations run on. The
// communicator is nonblocking, so that joining it and each call end by a
// deadline instead of hanging on a missing peer. Calls are serialized: one
// thread enqueues at a time (Enqueue), while others may poll or abort.
class NcclChannel {
 public:
  // Joins the communicator of `nranks` ranks identified by `id` as `rank`,
  // on CUDA device `device`, waiting until `deadline` for the others.
  static absl::StatusOr<std::unique_ptr<NcclChannel>> Join(
      int device, int nranks, int rank, const ncclUniqueId& id,
      absl::Time deadline);

  NcclChannel(const NcclChannel&) = delete;
  NcclChannel& operator=(const NcclChannel&) = delete;
  // Destroys the communicator, or frees an aborted one.
  ~NcclChannel();

  int device() const { return device_; }

  // Runs `enqueue(comm, stream)` after the work queued so far on the
  // default stream, waits (until `deadline`) for NCCL to have enqueued
  // everything, and records `done` on the stream after it.
  template <typename Fn>
  absl::Status Enqueue(absl::Time deadline, cudaEvent_t done, Fn enqueue) {
    MutexLock lock(&mu_);
    absl::Status status = Prepare();
    if (status.ok()) status = enqueue(comm_, stream_);
    if (status.ok()) status = AwaitEnqueued(deadline);
    if (status.ok())
      status = FromCuda(cudaEventRecord(done, stream_), "record");
    return status;
  }

  // NCCL's asynchronous error: OK while the communicator is healthy.
  absl::Status AsyncError();
  // Ends the communicator's pending and future operations.
  void Abort();

 private:
  NcclChannel(int device, ncclComm_t comm, cudaStream_t stream,
              cudaEvent_t ready);

  // Selects the device and makes the stream wait for the default stream.
  absl::Status Prepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls until NCCL is no longer in progress enqueuing.
  absl::Status AwaitEnqueued(absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);
  const cudaStream_t stream_;
  const cudaEvent_t ready_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_NCCL_NCCL_CHANNEL_H_
