// The host forms of EmbeddingBackward's sorted, segmented sum
// (dtensor/tensor/cuda/index_body.h): the keys, the key bits and the segment
// bounds against brute force, and the whole pipeline (a stable sort standing
// in for the device's radix sort) against the CPU kernel bit for bit.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/index_body.h"
#include "dtensor/tensor/nn_functional.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_body_test_util.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::cuda::body_testing::Bytes;
using ::dtensor::cuda::body_testing::ForFloatingStorage;
using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomTensor;

TEST(EmbeddingBackwardBodyTest, KeysAreRowsInsideTheShardElseNumRows) {
  // Rows [3, 7): 3..6 map to 0..3, the rest (negative and huge included) to 4.
  EXPECT_EQ(EmbeddingRowKey(3, 3, 4), 0u);
  EXPECT_EQ(EmbeddingRowKey(6, 3, 4), 3u);
  for (const int64_t outside :
       {int64_t{2}, int64_t{7}, int64_t{-1}, INT64_MIN, INT64_MAX}) {
    EXPECT_EQ(EmbeddingRowKey(outside, 3, 4), 4u) << outside;
  }
  EXPECT_EQ(EmbeddingRowKey(0, 0, 0), 0u);
}

TEST(EmbeddingBackwardBodyTest, KeyBitsCoverEveryKey) {
  for (int64_t num_rows :
       {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4},
        int64_t{127}, int64_t{128}, int64_t{128256}, int64_t{1} << 40}) {
    const int bits = EmbeddingKeyBits(num_rows);
    // The smallest bits >= 1 with num_rows < 2^bits, by brute force.
    int want = 1;
    while ((uint64_t{1} << want) <= static_cast<uint64_t>(num_rows)) ++want;
    EXPECT_EQ(bits, want) << num_rows;
  }
}

// The positions of `keys` stably sorted by key (the device's radix sort is
// stable), and the sorted keys.
void StableSort(const std::vector<uint64_t>& keys,
                std::vector<uint64_t>* sorted_keys,
                std::vector<int64_t>* positions) {
  positions->resize(keys.size());
  std::iota(positions->begin(), positions->end(), 0);
  std::stable_sort(positions->begin(), positions->end(),
                   [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  sorted_keys->clear();
  for (const int64_t p : *positions) sorted_keys->push_back(keys[p]);
}

TEST(EmbeddingBackwardBodyTest, SegmentsListEachRowsTokensInPositionOrder) {
  std::mt19937 rng(31);
  const auto uniform = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(rng);
  };
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t table_rows = uniform(1, 20);
    const int64_t first_row = uniform(0, table_rows);
    const int64_t num_rows = uniform(0, table_rows - first_row);
    const int64_t count = uniform(0, 40);
    // Some all one index; out-of-range ones (a failed check) skipped too.
    const bool same = trial % 5 == 0;
    const int64_t only = uniform(-2, table_rows + 1);
    std::vector<int64_t> indices(count);
    for (int64_t& index : indices) {
      index = same ? only : uniform(-2, table_rows + 1);
    }
    std::vector<uint64_t> keys;
    for (const int64_t index : indices) {
      keys.push_back(EmbeddingRowKey(index, first_row, num_rows));
    }
    std::vector<uint64_t> sorted;
    std::vector<int64_t> positions;
    StableSort(keys, &sorted, &positions);
    for (int64_t row = 0; row < num_rows; ++row) {
      const int64_t begin = EmbeddingSegmentStart(sorted.data(), count, row);
      const int64_t end = EmbeddingSegmentStart(sorted.data(), count, row + 1);
      std::vector<int64_t> got(positions.begin() + begin,
                               positions.begin() + end);
      std::vector<int64_t> want;
      for (int64_t i = 0; i < count; ++i) {
        if (indices[i] == first_row + row) want.push_back(i);
      }
      EXPECT_EQ(got, want) << "trial " << trial << " row " << row;
    }
    // Past the last row: only skipped tokens.
    const int64_t last = EmbeddingSegmentStart(sorted.data(), count, num_rows);
    for (int64_t k = last; k < count; ++k) {
      const int64_t index = indices[positions[k]];
      EXPECT_TRUE(index < first_row || index >= first_row + num_rows)
          << "trial " << trial << " index " << index;
    }
  }
}

// EmbeddingBackward of table rows [first_row, first_row + num_rows) by the
// bodies as the CUDA launch runs them: keys, a stable sort, the segment
// starts, then every element's segmented sum.
Tensor HostEmbeddingBackward(const Tensor& indices, const Tensor& grad,
                             int64_t first_row, int64_t num_rows) {
  const int64_t width = grad.size(-1);
  const Tensor source = grad.Contiguous();
  const std::vector<int64_t> rows =
      *indices.Contiguous().To(DType::kI64)->ToVector<int64_t>();
  const int64_t count = static_cast<int64_t>(rows.size());
  std::vector<uint64_t> keys;
  for (const int64_t index : rows) {
    keys.push_back(EmbeddingRowKey(index, first_row, num_rows));
  }
  std::vector<uint64_t> sorted;
  std::vector<int64_t> positions;
  StableSort(keys, &sorted, &positions);
  std::vector<int64_t> starts(num_rows + 1);
  for (int64_t row = 0; row <= num_rows; ++row) {
    starts[row] = EmbeddingSegmentStart(sorted.data(), count, row);
  }
  Tensor out = *Tensor::Empty({num_rows, width}, grad.dtype());
  ForFloatingStorage(grad.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    for (int64_t row = 0; row < num_rows; ++row) {
      for (int64_t j = 0; j < width; ++j) {
        EmbeddingSegmentSum<Compute<T>>(
            static_cast<const T*>(source.raw_data()), positions.data(),
            starts.data(), static_cast<T*>(out.raw_data()), width, row, j);
      }
    }
  });
  return out;
}

TEST(EmbeddingBackwardBodyTest, MatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(16);
  const auto uniform = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(rng);
  };
  for (int trial = 0; trial < 60; ++trial) {
    const DType dtype = testing::Pick(testing::kFloatDTypes, rng);
    const DType index_dtype =
        testing::Pick(std::vector<DType>{DType::kI32, DType::kI64}, rng);
    // Few table rows for many indices: repeated rows (one row only when
    // table_rows is 1); a block of the rows: indices outside it skipped.
    const int64_t table_rows = uniform(1, 9);
    const int64_t first_row = uniform(0, table_rows);
    const int64_t num_rows = uniform(0, table_rows - first_row);
    const Shape index_shape = {uniform(0, 4), uniform(1, 12)};
    const int64_t width = uniform(1, 9);
    const Tensor indices =
        RandomIndices(index_shape, table_rows, index_dtype, rng);
    const Tensor grad = RandomTensor(
        {index_shape[0], index_shape[1], width}, dtype,
        testing::Pick(
            std::vector<Layout>{Layout::kContiguous, Layout::kTransposed}, rng),
        rng, -5, 5);
    const Tensor expected =
        *EmbeddingBackward(indices, grad, table_rows, first_row, num_rows);
    const Tensor got =
        HostEmbeddingBackward(indices, grad, first_row, num_rows);
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_EQ(Bytes(got), Bytes(expected))
        << DTypeName(dtype) << " trial " << trial << " rows [" << first_row
        << ", " << first_row + num_rows << ") of " << table_rows;
  }
}

}  // namespace
}  // namespace dtensor::cuda
