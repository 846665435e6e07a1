// CrossEntropyBackward (dtensor/tensor/loss_backward.h) on the CPU against a
// loop over the rows in double (loss_backward_case.h): every floating dtype,
// reduction and vocab block, ignored rows, 0/1/odd rows, odd and large class
// counts; and its argument errors.
#include "dtensor/tensor/loss_backward.h"

#include <cstdint>
#include <random>
#include <vector>

#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/loss_backward_case.h"

namespace dtensor {
namespace {

using testing::ExpectInvalidArgument;
using testing::LossGradCase;

TEST(LossBackwardTest, MatchesTheDoubleReference) {
  std::mt19937 rng(5);
  uint32_t seed = 0;
  for (DType dtype : testing::kFloatDTypes) {
    for (Reduction reduction :
         {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      for (int64_t rows : {0, 1, 3, 17}) {
        LossGradCase c;
        c.dtype = dtype;
        c.reduction = reduction;
        c.rows = rows;
        c.classes = testing::Pick<int64_t>({1, 2, 7, 33, 1001}, rng);
        c.blocks = testing::Pick<int64_t>({1, 2, 3}, rng);
        c.blocks = c.blocks > c.classes ? 1 : c.blocks;
        c.block = std::uniform_int_distribution<int64_t>(0, c.blocks - 1)(rng);
        c.extra_count = seed % 3;
        c.misaligned = seed % 4 == 1;
        c.seed = seed++;
        testing::ExpectLossGradMatchesReference(c, Device::CPU());
      }
    }
  }
}

// A large odd vocabulary split in three, and rows that are all ignored with a
// count of 0 (a mean over no targets: zeros, not NaN).
TEST(LossBackwardTest, LargeVocabularyAndAllIgnored) {
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    LossGradCase c;
    c.dtype = dtype;
    c.rows = 3;
    c.classes = 50257;
    c.blocks = 3;
    c.block = 1;
    c.seed = 77;
    testing::ExpectLossGradMatchesReference(c, Device::CPU());
    c.classes = 9;
    c.blocks = 1;
    c.block = 0;
    c.ignored = 1.0;
    testing::ExpectLossGradMatchesReference(c, Device::CPU());
  }
}

TEST(LossBackwardTest, BadInputs) {
  CrossEntropyGradInputs in;
  in.logits = *Tensor::Zeros({2, 3}, DType::kBF16);
  in.target = *Tensor::Zeros({2}, DType::kI64);
  in.log_sum_exp = *Tensor::Zeros({2}, DType::kF32);
  in.grad = Tensor::Scalar(1, DType::kBF16);
  in.count = Tensor::Scalar(2, DType::kI64);
  EXPECT_TRUE(CrossEntropyBackward(in, Reduction::kMean).ok());
  ExpectInvalidArgument(CrossEntropyBackward(in, Reduction::kNone),
                        {"grad", "[2]"});
  ExpectInvalidArgument(CrossEntropyBackward(in, Reduction::kSum, -100, -1),
                        {"class_offset", "-1"});
  CrossEntropyGradInputs bad = in;
  bad.log_sum_exp = *Tensor::Zeros({2}, DType::kBF16);
  ExpectInvalidArgument(CrossEntropyBackward(bad, Reduction::kSum),
                        {"log_sum_exp", "bf16", "f32"});
  bad = in;
  bad.target = *Tensor::Zeros({2}, DType::kI32);
  ExpectInvalidArgument(CrossEntropyBackward(bad, Reduction::kSum),
                        {"target", "i32"});
  bad = in;
  bad.count = Tensor();
  ExpectInvalidArgument(CrossEntropyBackward(bad, Reduction::kMean), {"count"});
  EXPECT_TRUE(CrossEntropyBackward(bad, Reduction::kSum).ok());
  bad = in;
  bad.logits = *Tensor::Zeros({6}, DType::kBF16);
  ExpectInvalidArgument(CrossEntropyBackward(bad, Reduction::kSum),
                        {"logits", "[6]"});
  bad.logits = *Tensor::Zeros({2, 3}, DType::kI64);
  ExpectInvalidArgument(CrossEntropyBackward(bad, Reduction::kSum), {"logits"});
}

}  // namespace
}  // namespace dtensor
