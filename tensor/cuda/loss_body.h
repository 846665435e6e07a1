#ifndef DTENSOR_TENSOR_CUDA_LOSS_BODY_H_
#define DTENSOR_TENSOR_CUDA_LOSS_BODY_H_

// Per-row bodies of cross entropy over a block of the classes (loss
// parallel, dtensor/ops/vocab_ops.cc): a rank holds the classes
// [class_offset, class_offset + n) of every row; the row's max, then its sum
// of exp(logit - max) with the target's logit (picked by the rank whose block
// holds the target class, 0 elsewhere), are all-reduced over the ranks holding
// the other blocks, and each row's loss and log-sum-exp follow. The partial
// max and sum are row_body.h's LogSumExpMaxPartial and LogSumExpSumPartial.
// Shared by the CUDA launches (loss_kernels.cu) and the host loop of
// vocab_ops.cc. Then the per-element body of the fused backward, shared by
// the CUDA launch and the CPU kernel of dtensor/tensor/loss_backward.cc.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// The logit of class `target` where this block holds it, else 0 (an ignored
// target, whatever its value, lies outside every block or adds a logit that
// the loss drops).
template <typename T>
DT_HOST_DEVICE inline Compute<T> TargetLogitInBlock(Row<T> row, int64_t target,
                                                    int64_t class_offset) {
  const int64_t local = target - class_offset;
  return local >= 0 && local < row.n ? row[local] : Compute<T>(0);
}

// A row's loss (0 where its target is ignored) and log-sum-exp, in double,
// from its complete max, sum of exp(logit - max) and target logit.
struct RowLoss {
  double loss;
  double log_sum_exp;
};

DT_HOST_DEVICE inline RowLoss RowLossOf(double max, double sum_exp,
                                        double target_logit, bool ignored) {
  const double log_sum_exp = max + Log(sum_exp);
  return {ignored ? 0.0 : log_sum_exp - target_logit, log_sum_exp};
}

// ---- The fused backward (dtensor/tensor/loss_backward.h): one pass over
// the logits, each element read once and its gradient written once. ----

// What a row's elements share, in the compute type C: the log-sum-exp of the
// whole row (over every block), the loss's gradient for the row over the count
// (a mean's), the target's class within this block (-1 where the block lacks
// it) and whether the target is ignored.
template <typename C>
struct CrossEntropyGradRow {
  C log_sum_exp;
  C weight;
  int64_t hit;
  bool ignored;
};

// The row of target `target` in the block of `classes` classes starting at
// `class_offset`, from its log-sum-exp and the loss's gradient `grad` for it;
// `count` points to the count of non-ignored targets of a mean (null: no
// division, a sum or per-row losses).
template <typename C>
DT_HOST_DEVICE inline CrossEntropyGradRow<C> CrossEntropyGradRowOf(
    int64_t target, C log_sum_exp, C grad, const int64_t* count,
    int64_t ignore_index, int64_t class_offset, int64_t classes) {
  const int64_t local = target - class_offset;
  const C weight = count == nullptr ? grad : grad / static_cast<C>(*count);
  return {log_sum_exp, weight, local >= 0 && local < classes ? local : -1,
          target == ignore_index};
}

// The gradient of the logit of class j of the block: (softmax - onehot) *
// weight, softmax = exp(logit - log_sum_exp); 0 for an ignored target
// (whatever its logits, NaN included).
template <typename C>
DT_HOST_DEVICE inline C CrossEntropyGradOf(const CrossEntropyGradRow<C>& row,
                                           C logit, int64_t j) {
  if (row.ignored) return C(0);
  const C p = FastExpOf(logit - row.log_sum_exp);
  return (j == row.hit ? p - C(1) : p) * row.weight;
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_LOSS_BODY_H_
