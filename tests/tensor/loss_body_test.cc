// The host form of loss parallel's cross entropy bodies
// (dtensor/tensor/cuda/loss_body.h with row_body.h's partials), run the way
// the device path of dtensor/ops/vocab_ops.cc runs them: the classes split
// into blocks (one per rank), each block's row max, the max over the blocks
// (the all-reduce), each block's sum of exp and target logit, their sums (the
// all-reduce), then each row's loss and log-sum-exp. Against the CPU kernel
// CrossEntropy (per-sample losses) and a log-sum-exp in double written here.
#include "dtensor/tensor/cuda/loss_body.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomTensor;

// Rows' (loss, log-sum-exp) of contiguous f32 logits [rows, classes] split
// into `blocks` blocks of classes (the chunk rule: the first blocks one
// larger), C = float as the device computes for f32.
std::vector<RowLoss> BlockedRowLosses(const Tensor& logits,
                                      const std::vector<int64_t>& targets,
                                      int64_t blocks, int64_t ignore_index) {
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  const float* x = logits.data<float>();
  std::vector<int64_t> offsets = {0};
  for (int64_t b = 0; b < blocks; ++b) {
    offsets.push_back(offsets.back() + classes / blocks +
                      (b < classes % blocks ? 1 : 0));
  }
  std::vector<RowLoss> out;
  for (int64_t r = 0; r < rows; ++r) {
    const auto block = [&](int64_t b) {
      return Row<float>{x + r * classes + offsets[b],
                        offsets[b + 1] - offsets[b], 1};
    };
    float max = -INFINITY;
    for (int64_t b = 0; b < blocks; ++b) {
      max = std::max(max,
                     static_cast<float>(LogSumExpMaxPartial(block(b), 0, 1)));
    }
    float sum_exp = 0, picked = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      sum_exp += static_cast<float>(LogSumExpSumPartial(block(b), max, 0, 1));
      picked += TargetLogitInBlock(block(b), targets[r], offsets[b]);
    }
    out.push_back(RowLossOf(max, sum_exp, picked, targets[r] == ignore_index));
  }
  return out;
}

TEST(LossBodyTest, BlocksOfClassesGiveTheCpuKernelsLosses) {
  std::mt19937 rng(12);
  for (int64_t blocks : {1, 2, 3, 8}) {
    const int64_t rows = 9, classes = 29;
    const Tensor logits = RandomTensor({rows, classes}, DType::kF32,
                                       Layout::kContiguous, rng, -6, 6);
    Tensor target = RandomIndices({rows}, classes, DType::kI64, rng);
    target.data<int64_t>()[2] = -100;  // Ignored.
    const std::vector<int64_t> targets = target.ToVector<int64_t>().value();
    const std::vector<RowLoss> got =
        BlockedRowLosses(logits, targets, blocks, -100);
    const std::vector<double> expected =
        CrossEntropy(logits, target, Reduction::kNone)
            ->ToVector<double>()
            .value();
    const std::vector<double> x = logits.ToVector<double>().value();
    for (int64_t r = 0; r < rows; ++r) {
      const std::string context = absl::StrCat(blocks, " blocks, row ", r);
      EXPECT_NEAR(got[r].loss, expected[r], 1e-5 * (1 + expected[r]))
          << context;
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < classes; ++j) {
        max = std::max(max, x[r * classes + j]);
      }
      for (int64_t j = 0; j < classes; ++j) {
        sum += std::exp(x[r * classes + j] - max);
      }
      EXPECT_NEAR(got[r].log_sum_exp, max + std::log(sum), 1e-5) << context;
    }
    EXPECT_EQ(got[2].loss, 0.0);
  }
}

TEST(LossBodyTest, TheTargetLogitComesFromTheBlockHoldingIt) {
  const std::vector<float> values = {1, 2, 3, 4, 5};
  const Row<float> row{values.data() + 2, 3, 1};  // Classes 7..9.
  EXPECT_EQ(TargetLogitInBlock(row, 8, 7), 4.0f);
  EXPECT_EQ(TargetLogitInBlock(row, 6, 7), 0.0f);
  EXPECT_EQ(TargetLogitInBlock(row, 10, 7), 0.0f);
  EXPECT_EQ(TargetLogitInBlock(row, -100, 7), 0.0f);
}

}  // namespace
}  // namespace dtensor::cuda
