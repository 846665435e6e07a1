// ForEachStridedBlock / ForEachStridedRun / ForEachStridedElement against a
// brute-force odometer.
#include "dtensor/tensor/strided_loop.h"

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

using Offsets3 = std::array<int64_t, 3>;

// The offsets of every element in row-major order, by enumeration.
std::vector<Offsets3> BruteForce(
    const std::vector<int64_t>& shape,
    const std::array<std::vector<int64_t>, 3>& strides, const Offsets3& base) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  std::vector<Offsets3> visits;
  for (int64_t flat = 0; flat < numel; ++flat) {
    Offsets3 offsets = base;
    int64_t rest = flat;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      const int64_t index = rest % shape[d];
      rest /= shape[d];
      for (int k = 0; k < 3; ++k) offsets[k] += index * strides[k][d];
    }
    visits.push_back(offsets);
  }
  return visits;
}

TEST(StridedLoopTest, VisitsEveryElementInRowMajorOrder) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const int ndim = rng() % 6;
    std::vector<int64_t> shape(ndim);
    for (int64_t& size : shape)
      size = trial % 50 == 0 ? rng() % 2 : rng() % 4 + 1;
    std::array<std::vector<int64_t>, 3> strides;
    // Operand 0 contiguous, 1 random (with broadcast zeros), 2 transposed.
    int64_t stride = 1;
    strides[0].resize(ndim);
    strides[2].resize(ndim);
    for (int d = ndim - 1; d >= 0; --d) {
      strides[0][d] = stride;
      stride *= shape[d];
    }
    stride = 1;
    for (int d = 0; d < ndim; ++d) {
      strides[2][d] = stride;
      stride *= shape[d];
    }
    for (int d = 0; d < ndim; ++d)
      strides[1].push_back(rng() % 3 == 0 ? 0 : rng() % 20);
    const Offsets3 base = {0, static_cast<int64_t>(rng() % 7), 3};

    const std::vector<Offsets3> expected = BruteForce(shape, strides, base);
    std::vector<Offsets3> visits;
    ForEachStridedElement<3>(
        shape, {strides[0], strides[1], strides[2]}, base,
        [&](const Offsets3& offsets) { visits.push_back(offsets); });
    ASSERT_EQ(visits, expected) << "trial " << trial;
  }
}

// The blocks cover every element once, in row-major order, and a row- or
// column-broadcast operand of a 2-D shape leaves one block.
TEST(StridedLoopTest, BlocksVisitEveryElementInRowMajorOrder) {
  std::mt19937 rng(6);
  for (int trial = 0; trial < 200; ++trial) {
    const int ndim = rng() % 5;
    std::vector<int64_t> shape(ndim);
    for (int64_t& size : shape) size = rng() % 4 + 1;
    std::array<std::vector<int64_t>, 3> strides;
    for (auto& s : strides) {
      for (int d = 0; d < ndim; ++d)
        s.push_back(rng() % 3 == 0 ? 0 : rng() % 9);
    }
    const Offsets3 base = {1, 2, 3};
    std::vector<Offsets3> visits;
    ForEachStridedBlock<3>(
        shape, {strides[0], strides[1], strides[2]}, base,
        [&](const Offsets3& offsets, const Offsets3& steps, int64_t count,
            const Offsets3& row_steps, int64_t rows) {
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < count; ++j) {
              Offsets3 at;
              for (int k = 0; k < 3; ++k) {
                at[k] = offsets[k] + i * row_steps[k] + j * steps[k];
              }
              visits.push_back(at);
            }
          }
        });
    ASSERT_EQ(visits, BruteForce(shape, strides, base)) << "trial " << trial;
  }
  const std::vector<int64_t> shape = {6, 5};
  const std::vector<int64_t> out = {5, 1}, row = {0, 1}, column = {1, 0};
  int blocks = 0;
  ForEachStridedBlock<3>(
      shape, {out, row, column}, {0, 0, 0},
      [&](const Offsets3&, const Offsets3& steps, int64_t count,
          const Offsets3& row_steps, int64_t rows) {
        ++blocks;
        EXPECT_EQ(steps, (Offsets3{1, 1, 0}));
        EXPECT_EQ(row_steps, (Offsets3{5, 0, 1}));
        EXPECT_EQ(count, 5);
        EXPECT_EQ(rows, 6);
      });
  EXPECT_EQ(blocks, 1);
}

TEST(StridedLoopTest, ContiguousOperandsFormOneRun) {
  const std::vector<int64_t> shape = {2, 1, 3, 4};
  const std::vector<int64_t> strides = {12, 99, 4, 1};  // Size-1 dim ignored.
  int runs = 0;
  ForEachStridedRun<2>(shape, {strides, strides}, {5, 0},
                       [&](const std::array<int64_t, 2>& offsets,
                           const std::array<int64_t, 2>& steps, int64_t count) {
                         ++runs;
                         EXPECT_EQ(offsets, (std::array<int64_t, 2>{5, 0}));
                         EXPECT_EQ(steps, (std::array<int64_t, 2>{1, 1}));
                         EXPECT_EQ(count, 24);
                       });
  EXPECT_EQ(runs, 1);
}

TEST(StridedLoopTest, ZeroDAndEmptyShapes) {
  int calls = 0;
  ForEachStridedElement<1>({}, {absl::Span<const int64_t>()}, {7},
                           [&](const std::array<int64_t, 1>& offsets) {
                             ++calls;
                             EXPECT_EQ(offsets[0], 7);
                           });
  EXPECT_EQ(calls, 1);
  const std::vector<int64_t> shape = {3, 0, 2};
  const std::vector<int64_t> strides = {2, 2, 1};
  ForEachStridedElement<1>(shape, {strides}, {0},
                           [&](const std::array<int64_t, 1>&) { ++calls; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace dtensor
