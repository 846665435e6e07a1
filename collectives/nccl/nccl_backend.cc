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

absl::StatusOr<std::shared_ptr<NcclBackend>> NcclBackend::Create(
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
  return std::shared_ptr<NcclBackend>(new NcclBackend(std::move(runtime)));
}

NcclBackend::NcclBackend(std::shared_ptr<NcclRuntime> runtime)
    : runtime_(std::move(runtime)), instances_("nccl") {}

int64_t NcclBackend::rank() const { return runtime_->rank; }

int64_t NcclBackend::world_size() const { return runtime_->world_size; }

absl::StatusOr<std::shared_ptr<Communicator>> NcclBackend::CreateCommunicator(
    std::vector<int64_t> ranks) {
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

}  // namespace dtensor
