// ScaledDotProductAttention and its backward on CUDA tensors
// (attention_cuda.h): the tiled kernels of
// dtensor/tensor/cuda/attention_kernels.h, or the fallbacks for head dims whose
// tiles do not fit the device.
#include "dtensor/tensor/attention_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <array>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/attention_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/matmul.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

constexpr char kAttention[] = "ScaledDotProductAttention";
constexpr char kAttentionBackward[] = "ScaledDotProductAttentionBackward";

// Whether the tiled attention kernel's blocks fit the shared memory of q's
// device.
absl::StatusOr<bool> AttentionFitsDevice(const Tensor& q, const Tensor& v,
                                         bool backward) {
  int limit = 0;
  const cudaError_t error = cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, q.device().index);
  if (error != cudaSuccess) {
    return absl::InternalError(absl::StrCat(
        kAttention, ": reading the device's shared memory size failed: ",
        cudaGetErrorString(error)));
  }
  return AttentionSharedBytes(ToScalarType(q.dtype()), q.size(-1), v.size(-1),
                              backward) <= limit;
}

// The launch geometry of contiguous q, k, v on the batch shape `batch`.
absl::StatusOr<AttentionLaunch> AttentionLaunchOf(const Tensor& q,
                                                  const Tensor& k,
                                                  const Tensor& v,
                                                  const Shape& batch,
                                                  bool causal, double scale) {
  std::array<Strides, 3> strides;
  const Tensor* operands[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    Shape full = batch;
    full.push_back(operands[i]->size(-2));
    full.push_back(operands[i]->size(-1));
    DT_ASSIGN_OR_RETURN(const Tensor expanded, operands[i]->Expand(full));
    strides[i].assign(expanded.strides().begin(),
                      expanded.strides().begin() + batch.size());
  }
  AttentionLaunch launch;
  DT_ASSIGN_OR_RETURN(
      launch.batch,
      Coalesce<3>(batch, {&strides[0], &strides[1], &strides[2]}, kAttention));
  launch.entries = NumElements(batch);
  launch.lq = q.size(-2);
  launch.lk = k.size(-2);
  launch.e = q.size(-1);
  launch.ev = v.size(-1);
  launch.causal = causal;
  launch.scale = scale;
  return launch;
}

// The forward with the scores [batch..., lq, lk] materialized in the compute
// dtype: cuBLAS products around the masked-softmax kernel.
absl::StatusOr<Tensor> MaterializedAttention(const Tensor& q, const Tensor& k,
                                             const Tensor& v, bool causal,
                                             double scale) {
  const DType compute = AccumulatorDType(q.dtype());
  DT_ASSIGN_OR_RETURN(const Tensor qc, q.To(compute));
  DT_ASSIGN_OR_RETURN(const Tensor kc, k.To(compute));
  DT_ASSIGN_OR_RETURN(const Tensor vc, v.To(compute));
  DT_ASSIGN_OR_RETURN(const Tensor k_t, kc.Transpose(-2, -1));
  DT_ASSIGN_OR_RETURN(Tensor scores, Matmul(qc, k_t));
  DT_RETURN_IF_ERROR(
      MaskedSoftmaxOnDevice(scores, q.size(-2), k.size(-2), causal, scale));
  DT_ASSIGN_OR_RETURN(const Tensor out, Matmul(scores, vc));
  return out.To(q.dtype());
}

// The forward with its lse on the host, for head dims the kernel cannot
// hold.
absl::StatusOr<AttentionWithLse> AttentionWithLseOnHost(const Tensor& q,
                                                        const Tensor& k,
                                                        const Tensor& v,
                                                        bool causal,
                                                        double scale) {
  DT_ASSIGN_OR_RETURN(const Tensor hq, q.To(Device::CPU()));
  DT_ASSIGN_OR_RETURN(const Tensor hk, k.To(Device::CPU()));
  DT_ASSIGN_OR_RETURN(const Tensor hv, v.To(Device::CPU()));
  DT_ASSIGN_OR_RETURN(AttentionWithLse result, ScaledDotProductAttentionWithLse(
                                                   hq, hk, hv, causal, scale));
  DT_ASSIGN_OR_RETURN(result.out, result.out.To(q.device()));
  DT_ASSIGN_OR_RETURN(result.lse, result.lse.To(q.device()));
  return result;
}

// The backward on the host, for head dims the kernel cannot hold.
absl::StatusOr<AttentionGrads> AttentionBackwardOnHost(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor* lse, bool causal, double scale) {
  std::array<Tensor, 6> host;
  const Tensor* operands[] = {&q, &k, &v, &out, &grad_out, lse};
  for (int i = 0; i < 6; ++i) {
    if (operands[i] == nullptr) continue;
    DT_ASSIGN_OR_RETURN(host[i], operands[i]->To(Device::CPU()));
  }
  DT_ASSIGN_OR_RETURN(AttentionGrads grads,
                      lse == nullptr ? ScaledDotProductAttentionBackward(
                                           host[0], host[1], host[2], host[3],
                                           host[4], causal, scale)
                                     : ScaledDotProductAttentionBackwardWithLse(
                                           host[0], host[1], host[2], host[3],
                                           host[4], host[5], causal, scale));
  for (Tensor* grad : {&grads.dq, &grads.dk, &grads.dv}) {
    DT_ASSIGN_OR_RETURN(*grad, grad->To(q.device()));
  }
  return grads;
}

}  // namespace
#endif

absl::StatusOr<AttentionWithLse> AttentionForwardOnDevice(
    const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch,
    bool causal, double scale, bool need_lse) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const bool fits, AttentionFitsDevice(q, v, false));
  if (!fits && need_lse) {
    return AttentionWithLseOnHost(q, k, v, causal, scale);
  }
  if (!fits) {
    AttentionWithLse result;
    DT_ASSIGN_OR_RETURN(result.out,
                        MaterializedAttention(q, k, v, causal, scale));
    return result;
  }
  DT_ASSIGN_OR_RETURN(const Tensor qd, ContiguousOnDevice(q));
  DT_ASSIGN_OR_RETURN(const Tensor kd, ContiguousOnDevice(k));
  DT_ASSIGN_OR_RETURN(const Tensor vd, ContiguousOnDevice(v));
  DT_ASSIGN_OR_RETURN(const AttentionLaunch launch,
                      AttentionLaunchOf(qd, kd, vd, batch, causal, scale));
  Shape out_shape = batch;
  out_shape.push_back(launch.lq);
  out_shape.push_back(launch.ev);
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(out_shape, q.dtype(), q.device()));
  Shape lse_shape = batch;
  lse_shape.push_back(launch.lq);
  DT_ASSIGN_OR_RETURN(
      Tensor lse,
      Tensor::Empty(lse_shape, AccumulatorDType(q.dtype()), q.device()));
  AttentionWithLse result;
  DT_ASSIGN_OR_RETURN(
      result.out, LaunchInto(out, kAttention, [&](cudaStream_t stream) {
        return LaunchAttentionForward(
            ToScalarType(q.dtype()), launch, qd.raw_data(), kd.raw_data(),
            vd.raw_data(), out.raw_data(), lse.raw_data(), stream);
      }));
  result.lse = std::move(lse);
  return result;
#else
  return NotBuilt();
#endif
}

absl::StatusOr<AttentionGrads> AttentionBackwardOnDevice(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor* lse, const Shape& batch, bool causal,
    double scale) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const bool fits, AttentionFitsDevice(q, v, true));
  if (!fits) {
    return AttentionBackwardOnHost(q, k, v, out, grad_out, lse, causal, scale);
  }
  std::array<Tensor, 5> in;
  const Tensor* operands[] = {&q, &k, &v, &out, &grad_out};
  for (int i = 0; i < 5; ++i) {
    DT_ASSIGN_OR_RETURN(in[i], ContiguousOnDevice(*operands[i]));
  }
  DT_ASSIGN_OR_RETURN(
      const AttentionLaunch launch,
      AttentionLaunchOf(in[0], in[1], in[2], batch, causal, scale));
  const DType compute = AccumulatorDType(q.dtype());
  DT_ASSIGN_OR_RETURN(Tensor dq, Tensor::Zeros(q.shape(), compute, q.device()));
  DT_ASSIGN_OR_RETURN(Tensor dk, Tensor::Zeros(k.shape(), compute, q.device()));
  DT_ASSIGN_OR_RETURN(Tensor dv, Tensor::Zeros(v.shape(), compute, q.device()));
  const Shape rows = {launch.entries * launch.lq};
  Tensor lse_rows;
  if (lse == nullptr) {
    DT_ASSIGN_OR_RETURN(lse_rows, Tensor::Empty(rows, compute, q.device()));
  } else {
    DT_ASSIGN_OR_RETURN(lse_rows, ContiguousOnDevice(*lse));
  }
  DT_ASSIGN_OR_RETURN(const Tensor delta,
                      Tensor::Empty(rows, compute, q.device()));
  DT_RETURN_IF_ERROR(LaunchOn(q, kAttentionBackward, [&](cudaStream_t stream) {
    return LaunchAttentionBackward(
        ToScalarType(q.dtype()), launch, in[0].raw_data(), in[1].raw_data(),
        in[2].raw_data(), in[3].raw_data(), in[4].raw_data(),
        lse_rows.raw_data(), /*compute_lse=*/lse == nullptr, delta.raw_data(),
        dq.raw_data(), dk.raw_data(), dv.raw_data(), stream);
  }));
  AttentionGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dq, RoundedTo(dq, q.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dk, RoundedTo(dk, q.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dv, RoundedTo(dv, q.dtype()));
  return grads;
#else
  return NotBuilt();
#endif
}

absl::Status MaskedSoftmaxOnDevice(const Tensor& scores, int64_t lq, int64_t lk,
                                   bool causal, double scale) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckOn(scores, scores.device(),
                                       "ScaledDotProductAttention", "scores"));
  if (!scores.is_contiguous() ||
      (scores.dtype() != DType::kF32 && scores.dtype() != DType::kF64)) {
    return absl::InternalError(
        "ScaledDotProductAttention: scores must be contiguous f32 or f64");
  }
  if (lk == 0) return absl::OkStatus();
  return LaunchOn(
      scores, "ScaledDotProductAttention", [&](cudaStream_t stream) {
        return LaunchMaskedSoftmax(ToScalarType(scores.dtype()),
                                   scores.raw_data(), scores.numel() / lk, lq,
                                   lk, causal, scale, stream);
      });
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
