#include "dtensor/tensor/index_checks.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/mutex.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/index_check_arena.h"
#include "dtensor/tensor/kernel_checks.h"

#ifdef DTENSOR_CUDA
#include "dtensor/tensor/cuda/index_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#endif

namespace dtensor {
namespace internal {

// A queued device check: the report words of LaunchCheckIndices (in this
// thread's arena on `device`) being copied to `host` (two words of this
// thread's pinned slots) on the device's stream.
struct PendingCheck {
  const int64_t* host;
  int device;
  int64_t bound;
  std::string op;
};

}  // namespace internal

namespace {

using internal::PendingCheck;

// Past this many unread checks on a thread, the next one reads them first (a
// loop that never reads its results keeps a bounded list).
constexpr size_t kMaxPending = 1024;

// Page-locked slots for the flags of kMaxPending checks, two words each: the
// device copies a flag there without the host waiting, and the host reads it
// after any wait for the stream. Allocating them is slow and freeing them
// waits for the devices, so they come from a process-wide pool.
class PinnedSlots {
 public:
  PinnedSlots() = default;
  PinnedSlots(const PinnedSlots&) = delete;
  PinnedSlots& operator=(const PinnedSlots&) = delete;
  ~PinnedSlots() {
    if (slots_ == nullptr) return;
    MutexLock lock(&PoolMutex());
    Pool().push_back(slots_);
  }

  // Slot `i`'s two words. Errors: the allocation's.
  absl::StatusOr<int64_t*> Slot(size_t i) {
    if (slots_ == nullptr) {
      {
        MutexLock lock(&PoolMutex());
        if (!Pool().empty()) {
          slots_ = Pool().back();
          Pool().pop_back();
        }
      }
      if (slots_ == nullptr) {
        DT_ASSIGN_OR_RETURN(void* slots,
                            cuda::MallocPinned(kMaxPending * 2 * 8));
        slots_ = static_cast<int64_t*>(slots);
      }
    }
    return slots_ + 2 * i;
  }

 private:
  static Mutex& PoolMutex() {
    static auto* const mutex = new Mutex();
    return *mutex;
  }
  static std::vector<int64_t*>& Pool() {
    static auto* const pool = new std::vector<int64_t*>();
    return *pool;
  }

  int64_t* slots_ = nullptr;
};

// This thread's pending checks. A thread that ends with some still pending
// waits for their copies before its slots go back to the pool. Check i of
// `pending` uses slot i of `slots` and of its device's `arena`: slots are
// reused only once the pending checks are read (after the waits).
struct ThreadChecks {
  ~ThreadChecks() {
    for (const PendingCheck& check : pending) {
      cuda::Synchronize(check.device).IgnoreError();
    }
  }
  PinnedSlots slots;
  IndexCheckArena arena{kMaxPending, [](Device device, int64_t words) {
                          return Tensor::Zeros({words}, DType::kI64, device);
                        }};
  std::vector<PendingCheck> pending;
  // Slots [0, reserved) are a CUDA graph's (CapturedIndexChecks): its
  // replays rewrite them. Other checks take the slots from `reserved` on.
  // Kept while the graph lives or its requeued checks are pending.
  size_t reserved = 0;
  bool graph_alive = false;
};

ThreadChecks& Checks() {
  thread_local ThreadChecks checks;
  return checks;
}

// Waits for the stream of every device in `checks` but `waited` (-1: none),
// counting each wait as a host sync.
absl::Status WaitForDevices(const std::vector<PendingCheck>& checks,
                            int waited) {
  std::vector<int> devices;
  for (const PendingCheck& check : checks) {
    if (check.device == waited || std::find(devices.begin(), devices.end(),
                                            check.device) != devices.end()) {
      continue;
    }
    devices.push_back(check.device);
    Profiler::NoteHostSync();
    DT_RETURN_IF_ERROR(cuda::Synchronize(check.device));
  }
  return absl::OkStatus();
}

// Reads and clears this thread's pending checks, the stream of device
// `waited` (-1: none) already waited for.
absl::Status ReadPending(int waited) {
  ThreadChecks& checks = Checks();
  if (checks.pending.empty()) return absl::OkStatus();
  const absl::Status waits = WaitForDevices(checks.pending, waited);
  // Cleared either way: after a failed wait the device is unusable.
  std::vector<PendingCheck> read = std::move(checks.pending);
  checks.pending.clear();
  if (!checks.graph_alive) checks.reserved = 0;
  DT_RETURN_IF_ERROR(waits);
  for (const PendingCheck& check : read) {
    if (check.host[0] != 0) {
      return internal::CheckIndexInRange(check.host[1], check.bound, check.op);
    }
  }
  return absl::OkStatus();
}

// Queues the check of contiguous i64 CUDA `indices`.
absl::Status DeferCheck(const Tensor& indices, int64_t bound,
                        absl::string_view op) {
#ifdef DTENSOR_CUDA
  if (Checks().reserved + Checks().pending.size() >= kMaxPending) {
    DT_RETURN_IF_ERROR(ReadDeferredIndexChecks());
  }
  const int device = indices.device().index;
  const size_t slot = Checks().reserved + Checks().pending.size();
  DT_ASSIGN_OR_RETURN(int64_t* const host, Checks().slots.Slot(slot));
  DT_ASSIGN_OR_RETURN(const IndexCheckArena::Slot words,
                      Checks().arena.SlotOn(indices.device(), slot));
  DT_RETURN_IF_ERROR(cuda::LaunchOn(indices, op, [&](cudaStream_t stream) {
    return cuda::LaunchCheckIndices(indices.data<int64_t>(), indices.numel(),
                                    bound, words.scratch, words.report, stream);
  }));
  DT_RETURN_IF_ERROR(
      cuda::CopyToPinnedAsync(host, words.report, 2 * 8, device));
  Checks().pending.push_back({host, device, bound, std::string(op)});
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
  if (!indices.device().is_cpu() && contiguous.numel() > 0) {
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

absl::Status ReadDeferredIndexChecks() { return ReadPending(-1); }

absl::Status ReadDeferredIndexChecksAfterWait(Device waited) {
  return ReadPending(waited.is_cpu() ? -1 : waited.index);
}

absl::Status CapturedIndexChecks::PrepareCapture(Device device) {
  ThreadChecks& checks = Checks();
  if (checks.graph_alive) {
    return absl::FailedPreconditionError(
        "CapturedIndexChecks: this thread holds a captured graph's index "
        "checks already (one at a time)");
  }
  DT_RETURN_IF_ERROR(ReadDeferredIndexChecks());
  checks.reserved = 0;
  if (!device.is_cuda()) return absl::OkStatus();
  DT_RETURN_IF_ERROR(checks.slots.Slot(0).status());
  return checks.arena.SlotOn(device, 0).status();
}

CapturedIndexChecks CapturedIndexChecks::TakeCaptured() {
  ThreadChecks& checks = Checks();
  CapturedIndexChecks captured;
  captured.checks_ =
      std::make_shared<std::vector<PendingCheck>>(std::move(checks.pending));
  checks.pending.clear();
  checks.reserved = captured.checks_->size();
  checks.graph_alive = true;
  return captured;
}

void CapturedIndexChecks::Requeue() const {
  if (checks_ == nullptr || checks_->empty()) return;
  std::vector<PendingCheck>& pending = Checks().pending;
  // Slots are never shared: the first check's slot tells whether the set is
  // pending already (its reports now the latest replay's).
  const int64_t* const first = checks_->front().host;
  for (const PendingCheck& check : pending) {
    if (check.host == first) return;
  }
  pending.insert(pending.end(), checks_->begin(), checks_->end());
}

CapturedIndexChecks::~CapturedIndexChecks() {
  if (checks_ == nullptr) return;
  ThreadChecks& checks = Checks();
  checks.graph_alive = false;
  // Requeued checks still read their slots: released at the next read.
  if (checks.pending.empty()) checks.reserved = 0;
}

}  // namespace dtensor
