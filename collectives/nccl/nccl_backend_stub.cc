// The NCCL backend of a build without CUDA: it reports why it is missing.
#include "dtensor/collectives/nccl/nccl_backend.h"

namespace dtensor {

absl::StatusOr<std::shared_ptr<NcclBackend>> NcclBackend::Create(
    NcclBackendOptions options) {
  return absl::FailedPreconditionError(
      "the NCCL backend needs CUDA: dtensor was built without CUDA (build "
      "with --config=cuda)");
}

}  // namespace dtensor
