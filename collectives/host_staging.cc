#include "dtensor/collectives/host_staging.h"

#include <utility>
#include <variant>
#include <vector>

#include "dtensor/base/mutex.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/promise_work.h"

namespace dtensor {
namespace {

// A device tensor a call writes and the host copy the call writes instead.
struct WrittenTensor {
  Tensor device;
  Tensor host;
};

// Replaces the device tensors of `args` by host copies; the ones the call
// writes go to `written`.
class ArgsStager {
 public:
  explicit ArgsStager(std::vector<WrittenTensor>& written)
      : written_(written) {}

  absl::Status operator()(AllReduceArgs& a) { return Stage(a.tensor, true); }
  absl::Status operator()(BroadcastArgs& a) { return Stage(a.tensor, true); }
  absl::Status operator()(SendArgs& a) { return Stage(a.tensor, false); }
  absl::Status operator()(RecvArgs& a) { return Stage(a.tensor, true); }
  absl::Status operator()(BarrierArgs&) { return absl::OkStatus(); }
  // Every other call reads `input` and writes `output`.
  template <typename Args>
  absl::Status operator()(Args& a) {
    DT_RETURN_IF_ERROR(Stage(a.input, false));
    return Stage(a.output, true);
  }

 private:
  absl::Status Stage(Tensor& tensor, bool written) {
    if (!tensor.defined()) return absl::OkStatus();
    DT_ASSIGN_OR_RETURN(Tensor host, tensor.To(Device::CPU()));
    if (written) written_.push_back({tensor, host});
    tensor = std::move(host);
    return absl::OkStatus();
  }

  std::vector<WrittenTensor>& written_;
};

// Waits for the host call, then copies what it wrote to the device tensors.
class CopyBackWork final : public Work {
 public:
  CopyBackWork(std::shared_ptr<Work> host_call,
               std::vector<WrittenTensor> written)
      : host_call_(std::move(host_call)), written_(std::move(written)) {}

  absl::Status Wait() override {
    MutexLock lock(&mu_);
    if (!done_) {
      status_ = host_call_->Wait();
      if (status_.ok()) status_ = CopyBack();
      done_ = true;
    }
    return status_;
  }

  bool IsCompleted() const override { return host_call_->IsCompleted(); }

 private:
  absl::Status CopyBack() {
    for (WrittenTensor& tensor : written_) {
      // Through a contiguous device copy: the host-to-device copy needs a
      // contiguous target, the device view may be strided.
      DT_ASSIGN_OR_RETURN(Tensor arrived,
                          tensor.host.To(tensor.device.device()));
      DT_RETURN_IF_ERROR(tensor.device.CopyFrom(arrived));
    }
    return absl::OkStatus();
  }

  const std::shared_ptr<Work> host_call_;
  std::vector<WrittenTensor> written_;
  Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

class HostStagedBackend final : public Backend {
 public:
  HostStagedBackend(std::shared_ptr<Backend> host, Device device)
      : host_(std::move(host)), device_(device) {}

  int64_t rank() const override { return host_->rank(); }
  int64_t world_size() const override { return host_->world_size(); }

  absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
      std::vector<int64_t> ranks) override {
    DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> host,
                        host_->CreateCommunicator(std::move(ranks)));
    return std::make_shared<HostStagedCommunicator>(std::move(host), device_);
  }

 private:
  std::shared_ptr<Backend> host_;
  Device device_;
};

}  // namespace

HostStagedCommunicator::HostStagedCommunicator(
    std::shared_ptr<Communicator> host, Device device)
    : Communicator(host->group_ranks(), host->rank(), host->options()),
      host_(std::move(host)),
      device_(device) {}

std::shared_ptr<Work> HostStagedCommunicator::Start(
    const CollectiveCall& call) {
  CollectiveArgs args = call.args;
  std::vector<WrittenTensor> written;
  absl::Status staged = std::visit(ArgsStager(written), args);
  if (!staged.ok()) return CompletedWork(std::move(staged));
  CollectiveOptions options;
  options.deadline = call.deadline;
  return std::make_shared<CopyBackWork>(host_->Issue(std::move(args), options),
                                        std::move(written));
}

std::shared_ptr<Backend> StagedThroughHost(
    std::shared_ptr<Backend> host_backend, Device device) {
  if (device.is_cpu()) return host_backend;
  return std::make_shared<HostStagedBackend>(std::move(host_backend), device);
}

}  // namespace dtensor
