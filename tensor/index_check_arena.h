#ifndef DTENSOR_TENSOR_INDEX_CHECK_ARENA_H_
#define DTENSOR_TENSOR_INDEX_CHECK_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

// The device words of one thread's deferred index checks (index_checks.h):
// per device, `slots` slots reserved once, beside the thread's pinned host
// slots (slot i of both serves the thread's i-th pending check). A slot is
// a scratch word, which the check kernel accumulates into and the kernel
// that reports it resets to 0, and two report words that the reporting
// kernel writes whole, for the copy to the host. So a check costs no
// allocation and no launch beyond its own, once its device's arena exists.
namespace dtensor {

class IndexCheckArena {
 public:
  // The words of one slot (device memory of the arena's device).
  struct Slot {
    unsigned long long* scratch;
    unsigned long long* report;
  };
  // Returns `words` zeroed 8-byte words on `device` (an i64 tensor).
  using Allocate =
      std::function<absl::StatusOr<Tensor>(Device device, int64_t words)>;

  IndexCheckArena(size_t slots, Allocate allocate)
      : slots_(slots), allocate_(std::move(allocate)) {}
  IndexCheckArena(const IndexCheckArena&) = delete;
  IndexCheckArena& operator=(const IndexCheckArena&) = delete;

  // Slot `i` of `device`'s arena; the first call for a device allocates its
  // words (slots scratch words, then 2 * slots report words), zeroed.
  // Errors: i >= slots (OutOfRange naming i); the allocation's (a later call
  // tries again).
  absl::StatusOr<Slot> SlotOn(Device device, size_t i);

  // The devices that have an arena, in the order they got it.
  std::vector<Device> devices() const;

 private:
  size_t slots_;
  Allocate allocate_;
  std::vector<std::pair<Device, Tensor>> arenas_;
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_INDEX_CHECK_ARENA_H_
