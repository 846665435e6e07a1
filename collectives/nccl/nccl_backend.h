#ifndef DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_
#define DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/multiprocess/group_instances.h"
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

// What one process's NcclBackend and its communicators share
// (nccl_communicator.h; it needs CUDA's headers, this header does not).
struct NcclRuntime;

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
// Run the processes with `dtrun --nproc N -- program --backend nccl`; the
// program makes its backend through BackendRegistry
// (dtensor/collectives/backend_registry.h), from NcclOptionsFromEnv.
class NcclBackend final : public Backend {
 public:
  // Joins the job on this rank's device.
  // Errors: FailedPrecondition when built without CUDA (no --config=cuda) or
  // on a machine without a device, saying which; InvalidArgument naming a
  // device that does not exist; those of joining the store.
  static absl::StatusOr<std::shared_ptr<NcclBackend>> Create(
      NcclBackendOptions options);

  int64_t rank() const override;
  int64_t world_size() const override;

  // Member 0 makes the NCCL id and posts it; the members join with it,
  // waiting up to the default deadline for each other.
  // Errors: DeadlineExceeded naming member 0 when it did not post the id,
  // DataLoss when the id it posted is malformed, NCCL's: each naming the
  // group.
  absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
      std::vector<int64_t> ranks) override;

 private:
  explicit NcclBackend(std::shared_ptr<NcclRuntime> runtime);

  const std::shared_ptr<NcclRuntime> runtime_;
  GroupInstances instances_;
};

// Options from the launcher's environment
// (dtensor/collectives/multiprocess/launch_env.h): rank 0 hosts the store
// unless DTENSOR_AGENT_STORE=1; the device is LOCAL_RANK modulo the number of
// devices.
absl::StatusOr<NcclBackendOptions> NcclOptionsFromEnv(
    CommunicatorOptions communicator = CommunicatorOptions());

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_NCCL_NCCL_BACKEND_H_
