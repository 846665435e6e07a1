#include "dtensor/collectives/nccl/nccl_channel.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dtensor {
namespace {

constexpr absl::Duration kFirstPoll = absl::Microseconds(20);
constexpr absl::Duration kLongestPoll = absl::Milliseconds(1);
// How long a communicator being destroyed waits for its operations.
constexpr absl::Duration kFinalizeTimeout = absl::Seconds(10);

// Polls `comm` until NCCL has finished what it had in progress.
absl::Status PollInProgress(ncclComm_t comm, absl::Time deadline,
                            absl::string_view what) {
  absl::Duration pause = kFirstPoll;
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) return FromNccl(result, what);
    if (state != ncclInProgress) return FromNccl(state, what);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": NCCL did not finish in time"));
    }
    absl::SleepFor(pause);
    pause = std::min(2 * pause, kLongestPoll);
  }
}

}  // namespace

absl::Status FromCuda(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

absl::Status FromNccl(ncclResult_t result, absl::string_view what) {
  switch (result) {
    case ncclSuccess:
    case ncclInProgress:
      return absl::OkStatus();
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", ncclGetErrorString(result)));
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(
          absl::StrCat(what, ": ", ncclGetErrorString(result)));
    default:
      return absl::InternalError(
          absl::StrCat(what, ": ", ncclGetErrorString(result)));
  }
}

absl::StatusOr<std::unique_ptr<NcclChannel>> NcclChannel::Join(
    int device, int nranks, int rank, const ncclUniqueId& id,
    absl::Time deadline) {
  absl::Status status = FromCuda(cudaSetDevice(device), "cudaSetDevice");
  if (!status.ok()) return status;
  cudaStream_t stream = nullptr;
  status = FromCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                    "cudaStreamCreate");
  if (!status.ok()) return status;
  cudaEvent_t ready = nullptr;
  status = FromCuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                    "cudaEventCreate");
  if (!status.ok()) {
    cudaStreamDestroy(stream);
    return status;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  status = FromNccl(ncclCommInitRankConfig(&comm, nranks, id, rank, &config),
                    "ncclCommInitRank");
  if (status.ok()) status = PollInProgress(comm, deadline, "ncclCommInitRank");
  if (!status.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    cudaEventDestroy(ready);
    cudaStreamDestroy(stream);
    return status;
  }
  return std::unique_ptr<NcclChannel>(
      new NcclChannel(device, comm, stream, ready));
}

NcclChannel::NcclChannel(int device, ncclComm_t comm, cudaStream_t stream,
                         cudaEvent_t ready)
    : device_(device), comm_(comm), stream_(stream), ready_(ready) {}

NcclChannel::~NcclChannel() {
  {
    MutexLock lock(&mu_);
    cudaSetDevice(device_);
    if (!aborted_) {
      // Operations still queued end first, unless a peer keeps them from
      // ending: then the communicator is aborted instead.
      const ncclResult_t finalize = ncclCommFinalize(comm_);
      const bool flushed =
          (finalize == ncclSuccess || finalize == ncclInProgress) &&
          PollInProgress(comm_, absl::Now() + kFinalizeTimeout,
                         "ncclCommFinalize")
              .ok();
      if (flushed) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
  }
  cudaEventDestroy(ready_);
  cudaStreamDestroy(stream_);
}

absl::Status NcclChannel::AsyncError() {
  MutexLock lock(&mu_);
  if (aborted_) return absl::AbortedError("the NCCL communicator was aborted");
  ncclResult_t state = ncclSuccess;
  const ncclResult_t result = ncclCommGetAsyncError(comm_, &state);
  if (result != ncclSuccess) return FromNccl(result, "ncclCommGetAsyncError");
  return FromNccl(state, "NCCL");
}

void NcclChannel::Abort() {
  MutexLock lock(&mu_);
  if (aborted_) return;
  aborted_ = true;
  cudaSetDevice(device_);
  ncclCommAbort(comm_);
}

absl::Status NcclChannel::Prepare() {
  if (aborted_) return absl::AbortedError("the NCCL communicator was aborted");
  absl::Status status = FromCuda(cudaSetDevice(device_), "cudaSetDevice");
  if (status.ok()) {
    status = FromCuda(cudaEventRecord(ready_, cudaStreamLegacy), "record");
  }
  if (status.ok()) {
    status = FromCuda(cudaStreamWaitEvent(stream_, ready_, 0), "wait");
  }
  return status;
}

absl::Status NcclChannel::AwaitEnqueued(absl::Time deadline) {
  return PollInProgress(comm_, deadline, "NCCL enqueue");
}

}  // namespace dtensor
