#ifndef DTENSOR_TENSOR_INDEX_CHECKS_H_
#define DTENSOR_TENSOR_INDEX_CHECKS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/tensor/tensor.h"

// Range checks of index tensors that do not stop a device's stream.
//
// Reading CUDA indices on the host to check them waits for everything queued
// on the device's stream, once per embedding call. Instead, a CUDA index
// tensor is checked by a kernel that records the first bad index (in element
// order, as the CPU's check) in device words reserved once per thread and
// device (index_check_arena.h: no allocation or fill per check), and a copy
// of them to page-locked host memory is queued behind it on the stream,
// without the host waiting. The copy is read on the host once the host has
// waited for the stream anyway: reading a value costs no extra wait.
//
// The deferred-error contract: an out-of-range CUDA index is reported, as the
// InvalidArgument "<op>: index <i> is out of range [0, <bound>)" that the CPU
// gives at once, by the first of these on the thread that launched the check:
// ReadDeferredIndexChecks(), a copy of a CUDA tensor to the host
// (Tensor::To(Device::CPU()), ToVector) or Tensor::Item() of a CUDA tensor --
// at the latest when the step's loss is read. Such a copy reads the checks of
// its own device after its own wait (no extra host sync); checks of other
// devices cost one wait per device. The results computed from a bad index
// until then are unspecified (never memory outside the table). The pending
// checks are per thread (an in-process rank reads its own); more than 1024
// unread ones on a thread are read (one wait) before the next is queued.
namespace dtensor {

// Checks that every element of `indices` (i32 or i64) lies in [0, bound):
// CPU indices at once; CUDA indices by a deferred check (above) on their
// device, which queues a kernel and returns OK.
// Errors: a CPU index out of range; a non-integer or undefined `indices`
// (InvalidArgument naming `op`); a failed launch.
absl::Status CheckIndicesInRange(const Tensor& indices, int64_t bound,
                                 absl::string_view op);

// `indices` as contiguous i64 on `device`, range-checked against `bound` as
// CheckIndicesInRange does (CPU indices at once, before they are copied).
// Errors: CheckIndicesInRange's; what Tensor::To reports.
absl::StatusOr<Tensor> CheckedIndicesOn(const Tensor& indices, int64_t bound,
                                        Device device, absl::string_view op);

// Reads and clears this thread's pending deferred checks: waits once for the
// stream of each device that has some (a host sync each).
// Errors: the first bad index found (InvalidArgument, as above); a failed
// wait.
absl::Status ReadDeferredIndexChecks();

// ReadDeferredIndexChecks for a host copy of a tensor on `waited` that has
// just waited for that device's stream: its checks are read with no further
// wait (those of other devices as above).
absl::Status ReadDeferredIndexChecksAfterWait(Device waited);

namespace internal {
struct PendingCheck;
}  // namespace internal

// The deferred checks a CUDA graph captured (dtensor/tensor/cuda_graph.h,
// which calls these): their kernels and report copies run at every replay,
// rewriting the same slots, so the slots stay the graph's and each replay
// queues the checks again to be read under the contract above.
//
//   DT_RETURN_IF_ERROR(CapturedIndexChecks::PrepareCapture(device));
//   ... capture ...
//   CapturedIndexChecks checks = CapturedIndexChecks::TakeCaptured();
//   ... each replay: graph->Replay(); checks.Requeue();
//
// A replay queued before the host read the previous replay's checks
// rewrites their reports: the latest replay's are read (once: a set still
// pending is not queued twice, so the list stays bounded). Requires: every
// call and the destruction on the capturing thread (the checks are per
// thread).
class CapturedIndexChecks {
 public:
  // Before a capture on `device`: reads this thread's pending checks (a
  // host sync per device that has some), so that the capture's checks take
  // the first slots, and makes this thread's pinned report slots and its
  // words on a CUDA `device`, which a capture cannot make.
  // Errors: FailedPrecondition when this thread holds a graph's checks
  // already; ReadDeferredIndexChecks's; the allocations'.
  static absl::Status PrepareCapture(Device device);
  // After the capture: takes the checks it queued off this thread's pending
  // list (they were not run), keeping their slots for the graph.
  static CapturedIndexChecks TakeCaptured();
  // After a replay: queues the captured checks again, unless they are still
  // pending from an earlier replay.
  void Requeue() const;

  CapturedIndexChecks() = default;
  CapturedIndexChecks(CapturedIndexChecks&&) = default;
  CapturedIndexChecks& operator=(CapturedIndexChecks&&) = delete;
  // Gives the slots back (once no requeued check is pending).
  ~CapturedIndexChecks();

 private:
  std::shared_ptr<const std::vector<internal::PendingCheck>> checks_;
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_INDEX_CHECKS_H_
