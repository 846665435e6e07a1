#ifndef DTENSOR_TENSOR_ATTENTION_CUDA_H_
#define DTENSOR_TENSOR_ATTENTION_CUDA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// ScaledDotProductAttention and its backward (attention.h) on CUDA tensors
// (cuda_entry.h).
namespace dtensor::cuda {

// The forward and the backward on CUDA operands checked by the caller, with
// the output batch shape `batch` and the effective `scale` (> 0): the tiled
// kernels of dtensor/tensor/cuda/attention_kernels.h (bf16/f16 with head dims
// multiple of 16 up to 128 on the tensor cores). Where a block's tiles
// need more shared memory than the device grants (large head dims), the
// forward multiplies on cuBLAS around materialized scores and the backward
// runs on the host (copies). The forward's lse is undefined where it took
// the materialized path without `need_lse` (with it, that case runs on the
// host); the backward recomputes the rows' lse where `lse` is null.
absl::StatusOr<AttentionWithLse> AttentionForwardOnDevice(
    const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch,
    bool causal, double scale, bool need_lse);
absl::StatusOr<AttentionGrads> AttentionBackwardOnDevice(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor* lse, const Shape& batch, bool causal,
    double scale);
// The attention softmax in place on contiguous f32 or f64 `scores`
// [..., lq, lk]: scaled by `scale`, keys after query i + (lk - lq) at
// probability 0 when `causal`, a row that sees no key all zeros (the
// materializing fallback of AttentionForwardOnDevice).
absl::Status MaskedSoftmaxOnDevice(const Tensor& scores, int64_t lq, int64_t lk,
                                   bool causal, double scale);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_ATTENTION_CUDA_H_
