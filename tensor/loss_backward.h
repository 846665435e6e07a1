#ifndef DTENSOR_TENSOR_LOSS_BACKWARD_H_
#define DTENSOR_TENSOR_LOSS_BACKWARD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The operands of CrossEntropyBackward, all on the logits' device.
struct CrossEntropyGradInputs {
  // [rows, classes] of a floating dtype, any layout: a block of the classes
  // (a vocab shard) starting at class `class_offset`, or all of them.
  Tensor logits;
  // i64 [rows]: ignore_index or a class of the whole vocabulary (a target
  // outside this block picks no class of it; the forward checked the range).
  Tensor target;
  // [rows] in the compute dtype of the logits (f64 for f64, else f32): each
  // row's log-sum-exp over ALL classes (every block), as the forward made it.
  Tensor log_sum_exp;
  // The loss's gradient, of the logits' dtype: [rows] for Reduction::kNone,
  // 0-d otherwise.
  Tensor grad;
  // i64 0-d: the count of non-ignored targets that a mean divides by (the
  // forward's, global over the batch); read for Reduction::kMean only (and
  // on the device there: no host sync), undefined allowed otherwise.
  Tensor count;
};

// Cross entropy's gradient of the logits in one pass over them (one kernel
// on CUDA, no f32 copy of the logits): grad_logits[r, j] = (exp(logits[r, j] -
// log_sum_exp[r]) - (class_offset + j == target[r])) * w[r], w[r] = grad (or
// grad[r] for kNone) over count for kMean; 0 for rows whose target is
// ignore_index. Computed in the compute dtype (f32 for bf16/f16), written
// contiguous in the logits' dtype.
// Errors: InvalidArgument for undefined operands, operands on other devices,
// a non-floating logits dtype, shapes or dtypes other than documented, a
// negative class_offset.
absl::StatusOr<Tensor> CrossEntropyBackward(const CrossEntropyGradInputs& in,
                                            Reduction reduction,
                                            int64_t ignore_index = -100,
                                            int64_t class_offset = 0);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_LOSS_BACKWARD_H_
