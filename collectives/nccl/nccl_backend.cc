// The NCCL backend (built with --config=cuda).
#include "dtensor/collectives/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/multiprocess/group_failures.h"
#include "dtensor/collectives/multiprocess/group_instances.h"
#include "dtensor/collectives/nccl/nccl_channel.h"
#include "dtensor/collectives/nccl/nccl_communicator.h"
#include "dtensor/tensor/cuda_backend.h"

namespace dtensor {
namespace {

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(std::shared_ptr<NcclRuntime> runtime)
      : runtime_(std::move(runtime)), instances_("nccl") {}

  int64_t rank() const override { return runtime_->rank; }
  int64_t world_size() const override { return runtime_->world_size; }

  // Member 0 makes the NCCL id and posts it; the members join with it,
  // waiting up to the default deadline for each other.
  absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
      std::vector<int64_t> ranks) override {
    DT_RETURN_IF_ERROR(CheckGroupMembers(ranks, rank(), world_size()));
    const std::string prefix = instances_.NextPrefix(ranks);
    const std::string name =
        absl::StrCat("creating a communicator for group ", RanksText(ranks));
    const int64_t member =
        std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin();
    const absl::Duration timeout = runtime_->options.DeadlineOrDefault();
    const absl::Time deadline = absl::Now() + timeout;
    StoreClient& client = runtime_->session->client();
    ncclUniqueId id;
    if (member == 0) {
      DT_RETURN_IF_ERROR(FromNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
      DT_RETURN_IF_ERROR(client.Set(
          prefix + "id",
          absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
    } else {
      absl::StatusOr<std::vector<std::string>> posted =
          client.WaitAndGet({prefix + "id"}, timeout);
      if (!posted.ok()) {
        return absl::DeadlineExceededError(
            absl::StrCat(name, ": ranks [", ranks[0], "] did not join within ",
                         absl::FormatDuration(timeout)));
      }
      if ((*posted)[0].size() != sizeof(id)) {
        return absl::DataLossError(
            absl::StrCat(name, ": malformed NCCL id in the store"));
      }
      std::memcpy(&id, (*posted)[0].data(), sizeof(id));
    }
    absl::StatusOr<std::unique_ptr<NcclChannel>> channel =
        NcclChannel::Join(runtime_->device, static_cast<int>(ranks.size()),
                          static_cast<int>(member), id, deadline);
    if (!channel.ok()) {
      return absl::Status(channel.status().code(),
                          absl::StrCat(name, ": ", channel.status().message()));
    }
    return std::make_shared<NcclCommunicator>(std::move(ranks), member,
                                              runtime_->options, runtime_,
                                              *std::move(channel), prefix);
  }

 private:
  const std::shared_ptr<NcclRuntime> runtime_;
  GroupInstances instances_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Backend>> CreateNcclBackend(
    NcclBackendOptions options) {
  const int devices = cuda::DeviceCount();
  if (devices == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the NCCL backend needs a CUDA device: ", cuda::Describe()));
  }
  const int device = options.device >= 0
                         ? options.device
                         : static_cast<int>(options.local_rank % devices);
  if (device >= devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", device, " does not exist (", devices, " present)"));
  }
  auto runtime = std::make_shared<NcclRuntime>();
  runtime->device = device;
  DT_RETURN_IF_ERROR(JoinJob(options, *runtime));
  return std::shared_ptr<Backend>(
      std::make_shared<NcclBackend>(std::move(runtime)));
}

}  // namespace dtensor
