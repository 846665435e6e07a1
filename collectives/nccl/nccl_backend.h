#ifndef DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_
#define DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/multiprocess/multiprocess_options.h"

namespace dtensor {

// The job, the store (through which the ranks exchange NCCL's unique ids)
// and the communicators' options (MultiprocessOptions), and the device.
struct NcclBackendOptions : MultiprocessOptions {
  // This rank's CUDA device; -1 picks local_rank modulo the number of
  // devices.
  int device = -1;
  int64_t local_rank = 0;
};

// The NCCL backend of one process (rank) of a multi-process job: one CUDA
// device per rank, CUDA tensors, NCCL's collectives. Each communicator has
// its own NCCL communicator and CUDA stream; its calls wait for the work the
// caller queued on the default stream, and Work::Wait returns once the GPU
// has finished them. NCCL never gives up on a missing peer, so a Work that
// passes its deadline aborts the communicator (DeadlineExceeded; the
// communicator is broken after). Sends and receives run on a two-rank NCCL
// communicator per direction, made on first use, so that a send and a
// receive in flight together never wait on each other.
//
// Errors: FailedPrecondition when built without CUDA (no --config=cuda) or
// on a machine without a device, saying which; those of joining the store.
absl::StatusOr<std::shared_ptr<Backend>> CreateNcclBackend(
    NcclBackendOptions options);

// Options from the launcher's environment
// (dtensor/collectives/multiprocess/launch_env.h): rank 0 hosts the store
// unless DTENSOR_AGENT_STORE=1; the device is LOCAL_RANK modulo the number of
// devices.
absl::StatusOr<NcclBackendOptions> NcclOptionsFromEnv(
    CommunicatorOptions communicator = CommunicatorOptions());

// CreateNcclBackend(NcclOptionsFromEnv(communicator)): how a program
// started by dtrun joins its job on GPUs.
absl::StatusOr<std::shared_ptr<Backend>> NcclBackendFromEnv(
    CommunicatorOptions communicator = CommunicatorOptions());

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_
