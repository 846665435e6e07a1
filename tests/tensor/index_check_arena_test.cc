// The bookkeeping of the deferred index checks' device words
// (dtensor/tensor/index_check_arena.h), with CPU tensors standing in for the
// devices' words: one allocation per device, distinct zeroed slots that stay
// put, a bad slot and a failed allocation reported.
#include "dtensor/tensor/index_check_arena.h"

#include <cstdint>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// An arena of `slots` slots whose allocations are CPU tensors, recorded in
// `asked` (the device and the word count of each).
struct CountingArena {
  explicit CountingArena(size_t slots)
      : arena(slots, [this](Device device, int64_t words) {
          asked.push_back({device, words});
          return Tensor::Zeros({words}, DType::kI64);
        }) {}
  struct Ask {
    Device device;
    int64_t words;
  };
  std::vector<Ask> asked;
  IndexCheckArena arena;
};

TEST(IndexCheckArenaTest, AllocatesEachDeviceOnceOnFirstUse) {
  CountingArena counting(4);
  EXPECT_TRUE(counting.arena.devices().empty());
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_TRUE(counting.arena.SlotOn(Device::CUDA(0), i).ok());
      ASSERT_TRUE(counting.arena.SlotOn(Device::CUDA(1), i).ok());
    }
  }
  ASSERT_EQ(counting.asked.size(), 2u);
  EXPECT_EQ(counting.asked[0].device, Device::CUDA(0));
  EXPECT_EQ(counting.asked[1].device, Device::CUDA(1));
  EXPECT_EQ(counting.asked[0].words, 12);  // 4 scratch + 8 report words.
  EXPECT_EQ(counting.arena.devices(),
            (std::vector<Device>{Device::CUDA(0), Device::CUDA(1)}));
}

TEST(IndexCheckArenaTest, SlotsAreDistinctZeroedAndStable) {
  CountingArena counting(5);
  std::set<const unsigned long long*> words;
  for (const Device device : {Device::CUDA(0), Device::CUDA(3)}) {
    for (size_t i = 0; i < 5; ++i) {
      const IndexCheckArena::Slot slot = *counting.arena.SlotOn(device, i);
      EXPECT_EQ(*slot.scratch, 0u);
      EXPECT_EQ(slot.report[0], 0u);
      EXPECT_EQ(slot.report[1], 0u);
      // No word serves two slots (or two devices).
      EXPECT_TRUE(words.insert(slot.scratch).second) << i;
      EXPECT_TRUE(words.insert(slot.report).second) << i;
      EXPECT_TRUE(words.insert(slot.report + 1).second) << i;
      // A later call (after other devices' arenas) gives the same words.
      const IndexCheckArena::Slot again = *counting.arena.SlotOn(device, i);
      EXPECT_EQ(again.scratch, slot.scratch);
      EXPECT_EQ(again.report, slot.report);
    }
  }
  EXPECT_EQ(words.size(), 30u);
  EXPECT_EQ(counting.asked.size(), 2u);
}

TEST(IndexCheckArenaTest, WordsWrittenStayForTheSlotsNextUse) {
  CountingArena counting(2);
  // A slot whose report was written keeps it; the scratch word the kernel
  // left 0 is 0 for the next check.
  IndexCheckArena::Slot slot = *counting.arena.SlotOn(Device::CUDA(0), 1);
  slot.report[0] = 7;
  slot.report[1] = 9;
  *counting.arena.SlotOn(Device::CUDA(2), 0);  // Another device's arena.
  slot = *counting.arena.SlotOn(Device::CUDA(0), 1);
  EXPECT_EQ(slot.report[0], 7u);
  EXPECT_EQ(slot.report[1], 9u);
  EXPECT_EQ(*counting.arena.SlotOn(Device::CUDA(0), 0)->report, 0u);
}

TEST(IndexCheckArenaTest, ReportsASlotPastTheEnd) {
  CountingArena counting(3);
  const absl::StatusOr<IndexCheckArena::Slot> slot =
      counting.arena.SlotOn(Device::CUDA(0), 3);
  EXPECT_EQ(slot.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(slot.status().message().find("slot 3"), absl::string_view::npos);
  EXPECT_TRUE(counting.asked.empty());
}

TEST(IndexCheckArenaTest, AFailedAllocationIsReportedAndRetried) {
  int calls = 0;
  IndexCheckArena arena(2,
                        [&](Device, int64_t words) -> absl::StatusOr<Tensor> {
                          if (++calls == 1)
                            return absl::ResourceExhaustedError("no memory");
                          return Tensor::Zeros({words}, DType::kI64);
                        });
  EXPECT_EQ(arena.SlotOn(Device::CUDA(0), 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(arena.devices().empty());
  EXPECT_TRUE(arena.SlotOn(Device::CUDA(0), 0).ok());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace dtensor
