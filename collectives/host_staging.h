#ifndef DTENSOR_COLLECTIVES_HOST_STAGING_H_
#define DTENSOR_COLLECTIVES_HOST_STAGING_H_

#include <memory>

#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/tensor/device.h"

namespace dtensor {

// A communicator of `device` tensors over a communicator of CPU tensors: each
// call copies its tensors to the host, runs there, and copies what it writes
// back to the device when it is waited for. For ranks that are threads of
// one process sharing a GPU (the in-process backend), where a test or a demo
// needs correct collectives on CUDA tensors more than fast ones: every call
// pays two copies through the host. Same group, options and semantics as
// `host`, which it owns; `host`'s device is the CPU.
class HostStagedCommunicator final : public Communicator {
 public:
  HostStagedCommunicator(std::shared_ptr<Communicator> host, Device device);

  Device device() const override { return device_; }

 protected:
  std::shared_ptr<Work> Start(const CollectiveCall& call) override;

 private:
  std::shared_ptr<Communicator> host_;
  Device device_;
};

// The backend whose communicators are `host_backend`'s staged through the host
// for tensors on `device`; `host_backend` itself when `device` is the CPU.
std::shared_ptr<Backend> StagedThroughHost(
    std::shared_ptr<Backend> host_backend, Device device);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_HOST_STAGING_H_
