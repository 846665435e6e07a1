#ifndef DTENSOR_TENSOR_LOSS_CUDA_H_
#define DTENSOR_TENSOR_LOSS_CUDA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/loss_backward.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/tensor.h"

// Cross entropy (nn_functional.h), the row losses and steps of loss
// parallel's cross entropy (dtensor/ops/vocab_ops.cc) and the fused backward
// (loss_backward.h) on CUDA tensors (cuda_entry.h).
namespace dtensor::cuda {

absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor& logits,
                                            const Tensor& target,
                                            Reduction reduction,
                                            int64_t ignore_index);
// Per row of logits [rows, classes] on a CUDA device, with i64 `targets`
// [rows] on the same device (other than ignore_index, in range): f64
// [2, rows] on the device, row 0 the losses (logsumexp - the target's logit;
// 0 where the target is ignore_index), row 1 every row's logsumexp.
absl::StatusOr<Tensor> CrossEntropyRowsOnDevice(const Tensor& logits,
                                                const Tensor& targets,
                                                int64_t ignore_index);
// Loss parallel's cross entropy steps (dtensor/tensor/cuda/loss_kernels.h)
// over CUDA logits [rows, classes], this rank's class block starting at class
// `class_offset`, and i64 `targets` [rows] on their device; values in the
// compute dtype (f32, or f64 for f64 logits), which the caller all-reduces
// over the class group between the steps (dtensor/ops/vocab_ops.cc):
// each row's max [rows]; the sums [2, rows] of exp(logit - row_max) and of
// the target's logit (0 where the block lacks it); and from the all-reduced
// two, f64 [2, rows]: the losses (0 where the target is ignore_index) and the
// log-sum-exps.
absl::StatusOr<Tensor> LossShardMaxOnDevice(const Tensor& logits);
absl::StatusOr<Tensor> LossShardSumsOnDevice(const Tensor& logits,
                                             const Tensor& targets,
                                             const Tensor& row_max,
                                             int64_t class_offset);
absl::StatusOr<Tensor> LossShardFinishOnDevice(const Tensor& row_max,
                                               const Tensor& sums,
                                               const Tensor& targets,
                                               int64_t ignore_index);

// CrossEntropyBackward (loss_backward.h) of operands checked by the caller:
// one kernel, the count and the gradient read on the device.
absl::StatusOr<Tensor> CrossEntropyBackwardOnDevice(
    const CrossEntropyGradInputs& in, Reduction reduction, int64_t ignore_index,
    int64_t class_offset);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_LOSS_CUDA_H_
