// The fused SwiGLU on CUDA tensors (swiglu_cuda.h): launches of
// dtensor/tensor/cuda/elementwise_kernels.h over the operands' strided views.
#include "dtensor/tensor/swiglu_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/elementwise_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#endif

namespace dtensor::cuda {

absl::StatusOr<Tensor> SwiGluOnDevice(const Tensor& a, const Tensor& b) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(a.shape(), a.dtype(), a.device()));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<3> shape,
      Coalesce<3>(a.shape(), {&out.strides(), &a.strides(), &b.strides()},
                  "SwiGlu"));
  return LaunchInto(out, "SwiGlu", [&](cudaStream_t stream) {
    return LaunchSwiGlu(ToScalarType(a.dtype()), a.raw_data(), b.raw_data(),
                        out.raw_data(), shape, out.numel(), stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<SwiGluGrads> SwiGluBackwardOnDevice(const Tensor& grad,
                                                   const Tensor& a,
                                                   const Tensor& b) {
#ifdef DTENSOR_CUDA
  SwiGluGrads grads;
  DT_ASSIGN_OR_RETURN(grads.a, Tensor::Empty(a.shape(), a.dtype(), a.device()));
  DT_ASSIGN_OR_RETURN(grads.b, Tensor::Empty(a.shape(), a.dtype(), a.device()));
  DT_ASSIGN_OR_RETURN(const StridedShape<5> shape,
                      Coalesce<5>(a.shape(),
                                  {&grads.a.strides(), &grads.b.strides(),
                                   &grad.strides(), &a.strides(), &b.strides()},
                                  "SwiGluBackward"));
  DT_RETURN_IF_ERROR(
      LaunchOn(grads.a, "SwiGluBackward", [&](cudaStream_t stream) {
        return LaunchSwiGluBackward(ToScalarType(a.dtype()), grad.raw_data(),
                                    a.raw_data(), b.raw_data(),
                                    grads.a.raw_data(), grads.b.raw_data(),
                                    shape, a.numel(), stream);
      }));
  return grads;
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
