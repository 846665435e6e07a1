// The steps the CUDA entry points share (cuda_launch.h); CUDA builds only, so
// the file is empty without DTENSOR_CUDA.
#ifdef DTENSOR_CUDA
#include "dtensor/tensor/cuda_launch.h"

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/tensor_copies_cuda.h"

namespace dtensor::cuda {

ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
#define DT_TO_SCALAR_TYPE_CASE(enumerator, cpp_type) \
  case DType::enumerator:                            \
    return ScalarType::enumerator;
    DTENSOR_FOR_EACH_DTYPE(DT_TO_SCALAR_TYPE_CASE)
#undef DT_TO_SCALAR_TYPE_CASE
  }
  return ScalarType::kF32;  // Unreachable: every enumerator is handled above.
}

absl::Status Launched(cudaError_t error, absl::string_view op) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(op, ": CUDA launch failed: ", cudaGetErrorString(error)));
}

absl::StatusOr<cudaStream_t> StreamOf(const Tensor& t) {
  DT_ASSIGN_OR_RETURN(void* stream, CurrentStream(t.device().index));
  return static_cast<cudaStream_t>(stream);
}

absl::StatusOr<Tensor> ContiguousOnDevice(const Tensor& t) {
  if (t.is_contiguous()) return t;
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(t.shape(), t.dtype(), t.device()));
  DT_RETURN_IF_ERROR(CopyOnDevice(t, out));
  return out;
}

absl::StatusOr<Tensor> IndicesOnDevice(const std::vector<int64_t>& values,
                                       Device device) {
  DT_ASSIGN_OR_RETURN(const Tensor host,
                      Tensor::FromVector<int64_t>(
                          values, {static_cast<int64_t>(values.size())}));
  return host.To(device);
}

DType AccumulatorDType(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 ? DType::kF32 : dtype;
}

absl::StatusOr<Tensor> RoundedTo(const Tensor& acc, DType dtype) {
  if (acc.dtype() == dtype) return acc;
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(acc.shape(), dtype, acc.device()));
  DT_RETURN_IF_ERROR(CopyOnDevice(acc, out));
  return out;
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_CUDA
