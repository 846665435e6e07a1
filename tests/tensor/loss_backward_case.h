#ifndef DTENSOR_TESTS_TENSOR_LOSS_BACKWARD_CASE_H_
#define DTENSOR_TESTS_TENSOR_LOSS_BACKWARD_CASE_H_

#include <cstdint>
#include <string>

#include "dtensor/tensor/device.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/nn_functional.h"

// One case of CrossEntropyBackward (dtensor/tensor/loss_backward.h) against a
// reference in double written here: a loop over the rows with the softmax
// of the whole row (every class) in double. The CPU test
// (loss_backward_test) and the GPU one (loss_backward_cuda_test) share it.
namespace dtensor::testing {

struct LossGradCase {
  DType dtype = DType::kF32;
  int64_t rows = 1;
  // The whole vocabulary, split into `blocks` blocks of classes (the chunk
  // rule: the first ones one larger); the kernel gets block `block`, a
  // strided view of the whole logits when blocks > 1.
  int64_t classes = 1;
  int64_t blocks = 1;
  int64_t block = 0;
  Reduction reduction = Reduction::kMean;
  // The chance of a row's target being ignore_index (-100).
  double ignored = 0.25;
  // The mean's count exceeds this block's non-ignored targets by this much
  // (the global count over batch shards).
  int64_t extra_count = 0;
  // The logits contiguous but starting one element past an allocation (no
  // 16-byte aligned rows: the kernel's unpacked path).
  bool misaligned = false;
  uint32_t seed = 0;
};

std::string Describe(const LossGradCase& c);

// Runs the case on `device` and expects the reference's gradient within the
// dtype's tolerance (dtensor/tests/tensor/kernel_test_util.h), reporting the
// case on a mismatch.
void ExpectLossGradMatchesReference(const LossGradCase& c, Device device);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_LOSS_BACKWARD_CASE_H_
