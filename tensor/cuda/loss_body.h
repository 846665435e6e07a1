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
// vocab_ops.cc.

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

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_LOSS_BODY_H_
