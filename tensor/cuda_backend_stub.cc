// The CUDA backend when dtensor is built without --config=cuda.
#include "dtensor/tensor/cuda_backend.h"

namespace dtensor::cuda {

bool BuiltWithCuda() { return false; }
int DeviceCount() { return 0; }
std::string Describe() { return "built without CUDA"; }

absl::StatusOr<void*> Malloc(size_t, int) { return NotBuilt(); }
void Free(void*, int) {}
MemoryStats GetMemoryStats(int) { return {}; }
absl::Status EmptyCache(int) { return NotBuilt(); }
absl::Status Memcpy(void*, const void*, size_t, CopyKind, int) {
  return NotBuilt();
}
absl::Status CopyToPinnedAsync(void*, const void*, size_t, int) {
  return NotBuilt();
}
absl::StatusOr<void*> MallocPinned(size_t) { return NotBuilt(); }
absl::Status Fill(void*, size_t, uint64_t, int, int) { return NotBuilt(); }
absl::StatusOr<void*> CurrentStream(int) { return NotBuilt(); }
absl::Status Synchronize(int) { return NotBuilt(); }
absl::Status BeginCapture(int) { return NotBuilt(); }
absl::StatusOr<CapturedGraph> EndCapture(int, bool) { return NotBuilt(); }
absl::Status LaunchGraph(const CapturedGraph&, int) { return NotBuilt(); }
void DestroyGraph(const CapturedGraph&, int) {}

absl::StatusOr<Event> Event::Record(int) { return NotBuilt(); }
absl::StatusOr<Event> Event::RecordTimed(int) { return NotBuilt(); }
Event::Event(Event&& other) noexcept
    : event_(other.event_), device_(other.device_) {}
Event& Event::operator=(Event&&) noexcept { return *this; }
Event::~Event() = default;
absl::Status Event::BlockStream(void*) const { return NotBuilt(); }
absl::Status Event::Wait() const { return NotBuilt(); }
absl::StatusOr<double> Event::ElapsedUsSince(const Event&) const {
  return NotBuilt();
}

absl::Status Gemm(const GemmArgs&, int) { return NotBuilt(); }

}  // namespace dtensor::cuda
