#include "dtensor/tensor/index_check_arena.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::StatusOr<IndexCheckArena::Slot> IndexCheckArena::SlotOn(Device device,
                                                              size_t i) {
  if (i >= slots_) {
    return absl::OutOfRangeError(absl::StrCat(
        "IndexCheckArena: slot ", i, " of an arena of ", slots_, " slots"));
  }
  const Tensor* words = nullptr;
  for (const auto& [arena_device, arena] : arenas_) {
    if (arena_device == device) words = &arena;
  }
  if (words == nullptr) {
    DT_ASSIGN_OR_RETURN(Tensor arena,
                        allocate_(device, static_cast<int64_t>(3 * slots_)));
    arenas_.emplace_back(device, std::move(arena));
    words = &arenas_.back().second;
  }
  auto* base = static_cast<unsigned long long*>(words->raw_data());
  return Slot{base + i, base + slots_ + 2 * i};
}

std::vector<Device> IndexCheckArena::devices() const {
  std::vector<Device> devices;
  for (const auto& [device, arena] : arenas_) devices.push_back(device);
  return devices;
}

}  // namespace dtensor
