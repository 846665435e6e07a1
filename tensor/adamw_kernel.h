#ifndef DTENSOR_TENSOR_ADAMW_KERNEL_H_
#define DTENSOR_TENSOR_ADAMW_KERNEL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// AdamW's hyperparameters, torch.optim.AdamW's defaults; the optimizer
// (dtensor/nn/optim_adamw.h, as nn::AdamWOptions) and its fused step share
// them.
struct AdamWOptions {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// AdamW step `step` (t, >= 1) of `options` in one pass over the elements, in
// place, with no temporaries (torch.optim.AdamW's formula, as the fused CPU
// kernel of PyTorch computes it):
//   m = beta1 m + (1 - beta1) g
//   v = beta2 v + (1 - beta2) g^2
//   p = p (1 - lr wd) - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 -
//       beta2^t) + eps)
// in the compute type of the dtype (float for f32, bf16 and f16; double for
// f64), each element read and written once; the result is rounded to the
// dtype once per tensor and step (not after every operation).
// Operands may be strided views (a shard of a parameter); contiguous runs
// take the vectorized loop. A parameter on a CUDA device takes one device
// kernel with the same per-element body (dtensor/tensor/cuda/adamw_body.h), its
// operands on that device.
// Errors: InvalidArgument, naming the argument: an undefined tensor, one on
// another device than the parameter's (CPU or CUDA), a non-floating dtype or
// one that differs from the parameter's, a shape that differs from the
// parameter's, the parameter and moments not three distinct buffers, step < 1.
absl::Status AdamWStep(const Tensor& param, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const Tensor& grad,
                       const AdamWOptions& options, int64_t step);

// One parameter of AdamWStepMany: AdamWStep's operands and its step (t >= 1).
struct AdamWOperands {
  Tensor param;
  Tensor exp_avg;
  Tensor exp_avg_sq;
  Tensor grad;
  int64_t step = 1;
};

// AdamWStep of `options` on every entry of `params`, each at its own step:
// the multi-tensor step (PyTorch's foreach/fused AdamW). The entries are
// grouped by (device, dtype, step); a group on the CPU is stepped entry by
// entry with AdamWStep's kernel (bitwise AdamWStep's result), a group on a
// CUDA device in one launch of the same per-element body for all its
// contiguous entries (a few launches for groups beyond one launch's
// arguments: dtensor/tensor/cuda/multi_tensor_body.h), the step's constants
// and the tensors' addresses passed as kernel arguments, so no host-device
// copy or sync. Entries with a strided operand take AdamWStep's strided
// launch.
// Errors: InvalidArgument, before any element is written: AdamWStep's for
// an entry, prefixed "AdamWStepMany: parameter <index>: "; an entry whose
// param, exp_avg or exp_avg_sq shares its buffer with an earlier entry's.
absl::Status AdamWStepMany(absl::Span<const AdamWOperands> params,
                           const AdamWOptions& options);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_ADAMW_KERNEL_H_
