#include "dtensor/tensor/index_checks.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/kernel_checks.h"

#ifdef DTENSOR_CUDA
#include "dtensor/tensor/cuda/index_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#endif

namespace dtensor {
namespace {

// A queued device check: `flag` (i64 [2] on the device) as
// LaunchCheckIndices leaves it.
struct PendingCheck {
  Tensor flag;
  int64_t bound;
  std::string op;
};

// Past this many unread checks on a thread, the next one reads them first (a
// loop that never reads its results keeps a bounded list).
constexpr size_t kMaxPending = 1024;

std::vector<PendingCheck>& Pending() {
  thread_local std::vector<PendingCheck> pending;
  return pending;
}

// Queues the check of contiguous i64 CUDA `indices`.
absl::Status DeferCheck(const Tensor& indices, int64_t bound,
                        absl::string_view op) {
#ifdef DTENSOR_CUDA
  if (Pending().size() >= kMaxPending) {
    DT_RETURN_IF_ERROR(ReadDeferredIndexChecks());
  }
  DT_ASSIGN_OR_RETURN(Tensor flag,
                      Tensor::Zeros({2}, DType::kI64, indices.device()));
  DT_RETURN_IF_ERROR(cuda::LaunchOn(indices, op, [&](cudaStream_t stream) {
    return cuda::LaunchCheckIndices(
        indices.data<int64_t>(), indices.numel(), bound,
        static_cast<unsigned long long*>(flag.raw_data()), stream);
  }));
  Pending().push_back({std::move(flag), bound, std::string(op)});
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError(
      absl::StrCat(op, ": indices on ", indices.device().ToString(),
                   " in a build without CUDA"));
#endif
}

absl::Status CheckIndexType(const Tensor& indices, absl::string_view op) {
  if (!indices.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": indices is an undefined tensor"));
  }
  if (indices.dtype() != DType::kI32 && indices.dtype() != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": indices has dtype ", std::string(DTypeName(indices.dtype())),
        "; i32 or i64 is required"));
  }
  return absl::OkStatus();
}

absl::Status CheckOnHost(const Tensor& indices, int64_t bound,
                         absl::string_view op) {
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> values,
                      internal::ReadIndices(indices, op, "indices"));
  for (const int64_t v : values) {
    DT_RETURN_IF_ERROR(internal::CheckIndexInRange(v, bound, op));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> CheckedIndicesOn(const Tensor& indices, int64_t bound,
                                        Device device, absl::string_view op) {
  DT_RETURN_IF_ERROR(CheckIndexType(indices, op));
  if (indices.device().is_cpu()) {
    DT_RETURN_IF_ERROR(CheckOnHost(indices, bound, op));
  }
  DT_ASSIGN_OR_RETURN(Tensor moved, indices.To(device));
  DT_ASSIGN_OR_RETURN(Tensor wide, moved.To(DType::kI64));
  const Tensor contiguous = wide.Contiguous();
  if (!contiguous.defined()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(op, ": no memory for the indices"));
  }
  if (!indices.device().is_cpu()) {
    DT_RETURN_IF_ERROR(DeferCheck(contiguous, bound, op));
  }
  return contiguous;
}

absl::Status CheckIndicesInRange(const Tensor& indices, int64_t bound,
                                 absl::string_view op) {
  DT_RETURN_IF_ERROR(CheckIndexType(indices, op));
  if (indices.device().is_cpu()) return CheckOnHost(indices, bound, op);
  return CheckedIndicesOn(indices, bound, indices.device(), op).status();
}

absl::Status ReadDeferredIndexChecks() {
  if (Pending().empty()) return absl::OkStatus();
  // Taken first: the copies below must not re-enter this list.
  std::vector<PendingCheck> checks = std::move(Pending());
  Pending().clear();
  absl::Status first_error;
  for (const PendingCheck& check : checks) {
    int64_t flag[2] = {0, 0};
    absl::Status read =
        cuda::Memcpy(flag, check.flag.raw_data(), sizeof(flag),
                     cuda::CopyKind::kDeviceToHost, check.flag.device().index);
    if (!read.ok()) {
      first_error.Update(read);
    } else if (flag[0] != 0) {
      first_error.Update(
          internal::CheckIndexInRange(flag[1], check.bound, check.op));
    }
  }
  return first_error;
}

}  // namespace dtensor
