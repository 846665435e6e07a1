// The bookkeeping of the multi-tensor launches
// (dtensor/tensor/cuda/multi_tensor_body.h), as host code: ChunkRange tiles
// a tensor, and the launches PlanMultiTensorLaunches plans step every element
// of every tensor exactly once, in order, within the argument struct's
// limits, counted element by element against the tensors' sizes.
#include "dtensor/tensor/cuda/multi_tensor_body.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

constexpr int64_t kChunk = kMultiTensorChunk;

TEST(MultiTensorBodyTest, ChunksTileATensor) {
  for (const int64_t numel : {int64_t{0}, int64_t{1}, kChunk - 1, kChunk,
                              kChunk + 1, 3 * kChunk + 17}) {
    int64_t next = 0;
    for (int64_t c = 0; c < ChunkCount(numel); ++c) {
      const ElementRange range = ChunkRange(numel, c);
      EXPECT_EQ(range.begin, next) << numel << " chunk " << c;
      EXPECT_GT(range.end, range.begin) << numel << " chunk " << c;
      EXPECT_LE(range.end - range.begin, kChunk) << numel << " chunk " << c;
      next = range.end;
    }
    EXPECT_EQ(next, numel);
  }
  EXPECT_EQ(ChunkCount(0), 0);
  EXPECT_EQ(ChunkCount(kChunk), 1);
  EXPECT_EQ(ChunkCount(kChunk + 1), 2);
}

// The tensors of a plan: tensor t's operand d at a distinct fake address, so
// that a block's tensor is identified by its addresses.
std::vector<MultiTensorOperand<2>> Operands(const std::vector<int64_t>& numels,
                                            std::vector<char>& storage) {
  storage.assign(2 * numels.size() + 1, 0);
  std::vector<MultiTensorOperand<2>> operands;
  for (size_t t = 0; t < numels.size(); ++t) {
    operands.push_back({{&storage[2 * t], &storage[2 * t + 1]}, numels[t]});
  }
  return operands;
}

// Runs the plan of `numels`, counting how often each element is stepped and
// checking each launch's limits; returns the launch count.
int CheckPlan(const std::vector<int64_t>& numels) {
  std::vector<char> storage;
  const std::vector<MultiTensorOperand<2>> operands = Operands(numels, storage);
  std::vector<std::vector<uint8_t>> stepped(numels.size());
  for (size_t t = 0; t < numels.size(); ++t) stepped[t].assign(numels[t], 0);
  int launches = 0;
  const int error = PlanMultiTensorLaunches(
      operands.data(), static_cast<int64_t>(operands.size()),
      [&](const MultiTensorArgs<2>& args, int blocks) {
        ++launches;
        EXPECT_GT(blocks, 0);
        EXPECT_LE(blocks, kMultiTensorMaxBlocks);
        for (int b = 0; b < blocks; ++b) {
          const int slot = args.block_tensor[b];
          EXPECT_LT(slot, kMultiTensorMaxTensors);
          const auto t =
              static_cast<size_t>(static_cast<char*>(args.addresses[0][slot]) -
                                  storage.data()) /
              2;
          EXPECT_EQ(args.addresses[1][slot], &storage[2 * t + 1]);
          EXPECT_EQ(args.numel[slot], numels[t]);
          const ElementRange range =
              ChunkRange(args.numel[slot], args.block_chunk[b]);
          for (int64_t i = range.begin; i < range.end; ++i) ++stepped[t][i];
        }
        return 0;
      });
  EXPECT_EQ(error, 0);
  for (size_t t = 0; t < numels.size(); ++t) {
    for (int64_t i = 0; i < numels[t]; ++i) {
      if (stepped[t][i] != 1) {
        ADD_FAILURE() << "tensor " << t << " element " << i << " stepped "
                      << int{stepped[t][i]} << " times";
        return launches;
      }
    }
  }
  return launches;
}

TEST(MultiTensorBodyTest, OneLaunchForAFewSmallTensors) {
  EXPECT_EQ(CheckPlan({1, 0, 7, kChunk, kChunk + 1}), 1);
  EXPECT_EQ(CheckPlan({0, 0}), 0);
  EXPECT_EQ(CheckPlan({}), 0);
}

TEST(MultiTensorBodyTest, MoreTensorsThanOneLaunchHolds) {
  // 36 tensors fill a launch; the 37th..72nd a second, 73rd a third.
  EXPECT_EQ(CheckPlan(std::vector<int64_t>(kMultiTensorMaxTensors, 5)), 1);
  EXPECT_EQ(CheckPlan(std::vector<int64_t>(2 * kMultiTensorMaxTensors + 1, 3)),
            3);
  std::vector<int64_t> mixed;
  for (int t = 0; t < 100; ++t) mixed.push_back((t * 7919) % (3 * kChunk));
  CheckPlan(mixed);
}

TEST(MultiTensorBodyTest, ATensorOfMoreChunksThanOneLaunchGoesOn) {
  // 320 blocks a launch: 700 chunks take three launches, the tensor
  // continuing in slot 0 of the next; the small tensors after it share the
  // last one.
  EXPECT_EQ(CheckPlan({700 * kChunk - 3}), 3);
  EXPECT_EQ(CheckPlan({2, kMultiTensorMaxBlocks * kChunk, 9, 11}), 2);
  EXPECT_EQ(CheckPlan({kMultiTensorMaxBlocks * kChunk + 1, 5}), 2);
}

TEST(MultiTensorBodyTest, TheFirstFailedLaunchEndsThePlan) {
  std::vector<char> storage;
  const std::vector<MultiTensorOperand<2>> operands =
      Operands(std::vector<int64_t>(100, 1), storage);
  int launches = 0;
  const int error = PlanMultiTensorLaunches(
      operands.data(), 100,
      [&](const MultiTensorArgs<2>&, int) { return ++launches == 2 ? 7 : 0; });
  EXPECT_EQ(error, 7);
  EXPECT_EQ(launches, 2);
}

}  // namespace
}  // namespace dtensor::cuda
