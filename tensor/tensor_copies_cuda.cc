// The copies between tensors of one CUDA device (tensor_copies_cuda.h): a
// strided cast kernel (dtensor/tensor/cuda/copy_kernels.h).
#include "dtensor/tensor/tensor_copies_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/copy_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

absl::Status CopyOnDevice(const Tensor& src, const Tensor& dst) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(dst));
  return CopyOnStream(src, dst, stream);
#else
  return NotBuilt();
#endif
}

absl::Status CopyOnStream(const Tensor& src, const Tensor& dst,
                          void* stream_ptr) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckOn(src, dst.device(), "Copy", "source"));
  if (src.shape() != dst.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Copy: source shape ", ShapeToString(src.shape()),
                     " differs from ", ShapeToString(dst.shape())));
  }
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  DT_ASSIGN_OR_RETURN(
      const StridedShape<2> shape,
      Coalesce<2>(dst.shape(), {&dst.strides(), &src.strides()}, "Copy"));
  return Launched(
      LaunchCast(ToScalarType(src.dtype()), ToScalarType(dst.dtype()),
                 src.raw_data(), dst.raw_data(), shape, dst.numel(), stream),
      "Copy");
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
