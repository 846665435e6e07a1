// The row vectors of the CUDA map launch (tensor/cuda/map_launch.cuh): where
// RowVectorizable holds for a coalesced launch shape, the vector of elements
// [v vec, (v + 1) vec) is, for each operand, `vec` consecutive elements from an
// offset that is a multiple of `vec` (innermost stride 1) or one element
// (stride 0): the elements the one-element-per-thread walk visits, checked
// against that walk over random broadcast and permuted views.
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/launch_shape.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

// The launch shape of an output of `shape` (contiguous) and inputs viewed
// with `strides` over it, as the elementwise entry points coalesce it.
StridedShape<3> LaunchShape(const Shape& shape, const Strides& a,
                            const Strides& b) {
  const Strides out = ContiguousStrides(shape);
  return *Coalesce<3>(shape, {&out, &a, &b}, "test");
}

// Checks the vectors of `s` against the scalar walk; returns whether `s` was
// vectorizable with `vec`.
bool CheckRowVectors(const StridedShape<3>& s, int64_t numel, int vec) {
  if (!RowVectorizable(s, vec, /*outputs=*/1)) return false;
  const unsigned broadcast = InnerBroadcastMask(s);
  EXPECT_EQ(broadcast & 1u, 0u) << "the output is never broadcast";
  EXPECT_EQ(numel % vec, 0);
  for (int64_t v = 0; v * vec < numel; ++v) {
    int64_t first[3];
    OperandOffsetsAt(s, v * vec, first);
    for (int k = 0; k < 3; ++k) {
      const bool repeated = (broadcast >> k) & 1u;
      if (!repeated) {
        EXPECT_EQ(first[k] % vec, 0) << "operand " << k;
      }
      for (int j = 0; j < vec; ++j) {
        int64_t at[3];
        OperandOffsetsAt(s, v * vec + j, at);
        EXPECT_EQ(at[k], first[k] + (repeated ? 0 : j))
            << "operand " << k << " vector " << v << " lane " << j;
      }
    }
  }
  return true;
}

TEST(MapRowVectorTest, BiasAndColumnBroadcastsAreRowVectors) {
  const Shape shape = {6, 16};
  // x [6, 16] + bias [16]: strides (0, 1) for the bias.
  EXPECT_TRUE(CheckRowVectors(LaunchShape(shape, {16, 1}, {0, 1}), 96, 4));
  // x [6, 16] + column [6, 1]: one value along each row.
  const StridedShape<3> column = LaunchShape(shape, {16, 1}, {1, 0});
  EXPECT_EQ(InnerBroadcastMask(column), 4u);
  EXPECT_TRUE(CheckRowVectors(column, 96, 8));
}

TEST(MapRowVectorTest, RowsThatDoNotSplitIntoVectorsAreNot) {
  // A row of 6 is not a whole number of 4-vectors.
  EXPECT_FALSE(CheckRowVectors(LaunchShape({4, 6}, {6, 1}, {0, 1}), 24, 4));
  // A transposed input walks its rows with stride 4.
  EXPECT_FALSE(CheckRowVectors(LaunchShape({4, 4}, {1, 4}, {4, 1}), 16, 4));
  // An input whose rows start 6 elements apart: vectors would be misaligned.
  EXPECT_FALSE(CheckRowVectors(LaunchShape({3, 4}, {6, 1}, {4, 1}), 12, 4));
}

TEST(MapRowVectorTest, RandomViewsVisitTheScalarWalksElements) {
  std::mt19937 rng(11);
  int vectorizable = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int ndim = 1 + static_cast<int>(rng() % 4);
    Shape shape(ndim);
    for (int64_t& size : shape) size = 1 + static_cast<int64_t>(rng() % 8);
    if (rng() % 2 == 0)
      shape.back() = 4 * (1 + static_cast<int64_t>(rng() % 4));
    // Each input: contiguous in a padded buffer (a row pitch maybe not a
    // multiple of the vector), with some dims broadcast.
    std::array<Strides, 2> inputs;
    for (Strides& strides : inputs) {
      strides.assign(ndim, 0);
      int64_t step = 1;
      for (int d = ndim - 1; d >= 0; --d) {
        if (rng() % 4 == 0) continue;  // Broadcast along d.
        strides[d] = step;
        step *=
            shape[d] + (d == ndim - 1 ? static_cast<int64_t>(rng() % 3) : 0);
      }
    }
    int64_t numel = 1;
    for (int64_t size : shape) numel *= size;
    const StridedShape<3> s = LaunchShape(shape, inputs[0], inputs[1]);
    for (int vec : {2, 4, 8}) vectorizable += CheckRowVectors(s, numel, vec);
  }
  EXPECT_GT(vectorizable, 100);
}

}  // namespace
}  // namespace dtensor::cuda
