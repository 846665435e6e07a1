#ifndef DTENSOR_TENSOR_ADAMW_CUDA_H_
#define DTENSOR_TENSOR_ADAMW_CUDA_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/cuda/adamw_body.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// The fused AdamW step of adamw_kernel.h on CUDA tensors (cuda_entry.h).
namespace dtensor::cuda {

// In place, with the step's constants `k`; the operands are checked by
// AdamWStep.
absl::Status AdamWStepOnDevice(const Tensor& param, const Tensor& exp_avg,
                               const Tensor& exp_avg_sq, const Tensor& grad,
                               const AdamWCoefficients<double>& k);

// AdamWStepMany's step of one group: `group`'s entries, checked, share a
// CUDA device, dtype and the constants `k`. The entries whose four operands
// are contiguous take one multi-tensor launch (a few for many chunks), the
// others AdamWStepOnDevice each.
absl::Status AdamWStepManyOnDevice(absl::Span<const AdamWOperands* const> group,
                                   const AdamWCoefficients<double>& k);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_ADAMW_CUDA_H_
