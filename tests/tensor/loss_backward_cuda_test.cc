// CrossEntropyBackward (dtensor/tensor/loss_backward.h) on a CUDA device
// against the loop over the rows in double (loss_backward_case.h): every
// floating dtype and reduction, vocab blocks, ignored rows, the packed
// (16-byte) and unpacked paths, a Llama-3 vocabulary (128256). Needs a GPU
// (tag `gpu`); skips with a message otherwise.
#include <cstdint>
#include <random>

#include "dtensor/tensor/cuda_backend.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/loss_backward_case.h"

namespace dtensor {
namespace {

using testing::LossGradCase;

TEST(LossBackwardCudaTest, MatchesTheDoubleReference) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  std::mt19937 rng(9);
  uint32_t seed = 100;
  for (DType dtype : testing::kFloatDTypes) {
    for (Reduction reduction :
         {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      for (int64_t rows : {0, 1, 5, 300}) {
        LossGradCase c;
        c.dtype = dtype;
        c.reduction = reduction;
        c.rows = rows;
        // 256 and 4096 take 16-byte packs for every dtype (unless
        // misaligned); the odd ones never do.
        c.classes = testing::Pick<int64_t>({1, 7, 256, 1001, 4096}, rng);
        c.blocks = c.classes >= 3 ? testing::Pick<int64_t>({1, 2}, rng) : 1;
        c.block = c.blocks - 1;
        c.extra_count = seed % 3;
        c.misaligned = seed % 3 == 1;
        c.seed = seed++;
        testing::ExpectLossGradMatchesReference(c, Device::CUDA(0));
      }
    }
  }
}

TEST(LossBackwardCudaTest, LlamaVocabulary) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t blocks : {1, 4}) {
      LossGradCase c;
      c.dtype = dtype;
      c.rows = 8;
      c.classes = 128256;
      c.blocks = blocks;
      c.block = blocks - 1;
      c.seed = 7 + blocks;
      testing::ExpectLossGradMatchesReference(c, Device::CUDA(0));
    }
  }
}

}  // namespace
}  // namespace dtensor
