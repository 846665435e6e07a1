#ifndef DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_
#define DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/collective_options.h"

namespace dtensor {

struct NcclBackendOptions {
  int64_t rank = 0;
  int64_t world_size = 1;
  // The rendezvous store (dtensor/collectives/multiprocess/store_server.h),
  // through which the ranks exchange NCCL's unique ids.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // Whether this process hosts the store (rank 0 does unless a launcher
  // does). Port 0 picks a free port, which only a world of one can use.
  bool host_store = false;
  // This rank's CUDA device; -1 picks local_rank modulo the number of
  // devices.
  int device = -1;
  int64_t local_rank = 0;
  // Options of every communicator; their default deadline also bounds the
  // wait for the store and for a communicator's members.
  CommunicatorOptions communicator;
  // How long a process that hosts the store waits, when it shuts down, for
  // the other ranks to leave it.
  absl::Duration linger = absl::Seconds(30);
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
// Built without CUDA (no --config=cuda), or on a machine without a device,
// Create returns FailedPrecondition saying which.
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
