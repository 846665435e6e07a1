// The fused AdamW step on CUDA tensors (adamw_cuda.h): one launch of
// dtensor/tensor/cuda/adamw_kernels.h over the four operands' strides.
#include "dtensor/tensor/adamw_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/adamw_kernels.h"
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

}  // namespace dtensor::cuda
