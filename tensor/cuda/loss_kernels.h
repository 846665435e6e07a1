#ifndef DTENSOR_TENSOR_CUDA_LOSS_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_LOSS_KERNELS_H_

// Launches of the cross entropy kernels on a stream, over contiguous logits
// [rows, classes] of `type` (floating): the loss of whole rows, and loss
// parallel's steps (loss_body.h) over this rank's class block, starting at
// class `class_offset`. The steps' values are in the compute type C of `type`
// (float for f32, bf16 and f16; double for f64), the type the caller
// all-reduces between the steps. Pointers are device pointers; each returns
// the launch error.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// losses[r] = logsumexp(row r) - row r[targets[r]], 0 where targets[r] ==
// ignore_index; targets are checked to lie in range before launch. Unless
// null, log_sum_exp[r] = logsumexp(row r) for every row.
cudaError_t LaunchCrossEntropyRows(ScalarType type, const void* logits,
                                   const int64_t* targets, double* losses,
                                   double* log_sum_exp, int64_t rows,
                                   int64_t classes, int64_t ignore_index,
                                   cudaStream_t stream);

// row_max [rows] (C): each row's largest logit (-inf for no classes).
cudaError_t LaunchLossShardMax(ScalarType type, const void* logits,
                               void* row_max, int64_t rows, int64_t classes,
                               cudaStream_t stream);
// sums [2, rows] (C): row 0 the sum of exp(logit - row_max[r]) over the block,
// row 1 the logit of targets[r] where the block holds it, else 0.
cudaError_t LaunchLossShardSums(ScalarType type, const void* logits,
                                const int64_t* targets, const void* row_max,
                                void* sums, int64_t rows, int64_t classes,
                                int64_t class_offset, cudaStream_t stream);
// out [2, rows] (f64) from the all-reduced row_max and sums (C of `type`):
// row 0 the losses (0 where targets[r] == ignore_index), row 1 the
// log-sum-exps.
cudaError_t LaunchLossShardFinish(ScalarType type, const void* row_max,
                                  const void* sums, const int64_t* targets,
                                  double* out, int64_t rows,
                                  int64_t ignore_index, cudaStream_t stream);

// The operands of the fused backward (dtensor/tensor/loss_backward.h) on the
// device: logits [rows, classes] of `type`, targets [rows], the rows'
// log-sum-exps [rows] (C), the loss's gradient ([rows] or one value, of
// `type`) and, for a mean, the count (one i64; null otherwise).
struct CrossEntropyGradOperands {
  const void* logits;
  const int64_t* targets;
  const void* log_sum_exp;
  const void* grad;
  const int64_t* count;
};

// grad_logits [rows, classes] (`type`) = loss_body.h's CrossEntropyGradOf of
// every logit, one block per row, each logit read once; `per_row_grad`: the
// gradient has one value per row (reduction none).
cudaError_t LaunchCrossEntropyBackward(const CrossEntropyGradOperands& in,
                                       ScalarType type, void* grad_logits,
                                       int64_t rows, int64_t classes,
                                       bool per_row_grad, int64_t ignore_index,
                                       int64_t class_offset,
                                       cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_LOSS_KERNELS_H_
