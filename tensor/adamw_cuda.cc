// The fused AdamW step on CUDA tensors (adamw_cuda.h): launches of
// dtensor/tensor/cuda/adamw_kernels.h, over the four operands' strides or
// over many contiguous tensors at once.
#include "dtensor/tensor/adamw_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/adamw_kernels.h"
#include "dtensor/tensor/cuda/multi_tensor_body.h"
#include "dtensor/tensor/cuda_launch.h"
#endif

namespace dtensor::cuda {

absl::Status AdamWStepOnDevice(const Tensor& param, const Tensor& exp_avg,
                               const Tensor& exp_avg_sq, const Tensor& grad,
                               const AdamWCoefficients<double>& k) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const StridedShape<4> shape,
                      Coalesce<4>(param.shape(),
                                  {&param.strides(), &exp_avg.strides(),
                                   &exp_avg_sq.strides(), &grad.strides()},
                                  "AdamWStep"));
  return LaunchOn(param, "AdamWStep", [&](cudaStream_t stream) {
    return LaunchAdamW(ToScalarType(param.dtype()), param.raw_data(),
                       exp_avg.raw_data(), exp_avg_sq.raw_data(),
                       grad.raw_data(), shape, param.numel(), k, stream);
  });
#else
  return NotBuilt();
#endif
}

absl::Status AdamWStepManyOnDevice(absl::Span<const AdamWOperands* const> group,
                                   const AdamWCoefficients<double>& k) {
#ifdef DTENSOR_CUDA
  std::vector<MultiTensorOperand<4>> contiguous;
  contiguous.reserve(group.size());
  for (const AdamWOperands* e : group) {
    if (e->param.is_contiguous() && e->exp_avg.is_contiguous() &&
        e->exp_avg_sq.is_contiguous() && e->grad.is_contiguous()) {
      contiguous.push_back({{e->param.raw_data(), e->exp_avg.raw_data(),
                             e->exp_avg_sq.raw_data(), e->grad.raw_data()},
                            e->param.numel()});
      continue;
    }
    DT_RETURN_IF_ERROR(
        AdamWStepOnDevice(e->param, e->exp_avg, e->exp_avg_sq, e->grad, k));
  }
  if (contiguous.empty()) return absl::OkStatus();
  const Tensor& first = group.front()->param;
  return LaunchOn(first, "AdamWStepMany", [&](cudaStream_t stream) {
    return LaunchAdamWMany(ToScalarType(first.dtype()), contiguous.data(),
                           static_cast<int64_t>(contiguous.size()), k, stream);
  });
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
