// The index ops on CUDA tensors (indexing_cuda.h): launches of
// dtensor/tensor/cuda/index_kernels.h with the index values copied to the
// device.
#include "dtensor/tensor/indexing_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <vector>

#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/index_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/tensor_copies_cuda.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

// `strides` with the entry of `dim` zeroed: walking an index's shape then
// stays in the line of the tensor that the index value picks.
Strides WithoutDim(const Strides& strides, int64_t dim) {
  Strides result = strides;
  result[dim] = 0;
  return result;
}

}  // namespace
#endif

absl::StatusOr<Tensor> IndexSelectOnDevice(const Tensor& x, int64_t dim,
                                           const std::vector<int64_t>& rows) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  Shape out_shape = x.shape();
  out_shape[dim] = static_cast<int64_t>(rows.size());
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(out_shape, x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  const auto shape = absl::MakeConstSpan(x.shape());
  const int64_t outer = NumElements(shape.subspan(0, dim));
  const int64_t inner = NumElements(shape.subspan(dim + 1));
  DT_ASSIGN_OR_RETURN(const Tensor device_rows,
                      IndicesOnDevice(rows, x.device()));
  return LaunchInto(out, "IndexSelect", [&](cudaStream_t stream) {
    return LaunchIndexSelect(ToScalarType(x.dtype()), input.raw_data(),
                             device_rows.data<int64_t>(), out.raw_data(), outer,
                             out_shape[dim], x.size(dim), inner, stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> GatherOnDevice(const Tensor& x, int64_t dim,
                                      const Shape& index_shape,
                                      const std::vector<int64_t>& picks) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(index_shape, x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  const Strides x_strides = WithoutDim(x.strides(), dim);
  DT_ASSIGN_OR_RETURN(const StridedShape<1> shape,
                      Coalesce<1>(index_shape, {&x_strides}, "Gather"));
  DT_ASSIGN_OR_RETURN(const Tensor device_picks,
                      IndicesOnDevice(picks, x.device()));
  return LaunchInto(out, "Gather", [&](cudaStream_t stream) {
    return LaunchGather(ToScalarType(x.dtype()), x.raw_data(),
                        device_picks.data<int64_t>(), out.raw_data(), shape,
                        x.strides()[dim], out.numel(), stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> ScatterAddOnDevice(const Tensor& x, int64_t dim,
                                          const Shape& index_shape,
                                          const std::vector<int64_t>& targets,
                                          const Tensor& src) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckOn(src, x.device(), "ScatterAdd", "src"));
  // The accumulator: a contiguous copy of x.
  DT_ASSIGN_OR_RETURN(
      Tensor acc,
      Tensor::Empty(x.shape(), AccumulatorDType(x.dtype()), x.device()));
  DT_RETURN_IF_ERROR(CopyOnDevice(x, acc));
  if (!targets.empty()) {
    const Strides acc_strides = WithoutDim(acc.strides(), dim);
    DT_ASSIGN_OR_RETURN(
        const StridedShape<2> shape,
        Coalesce<2>(index_shape, {&acc_strides, &src.strides()}, "ScatterAdd"));
    DT_ASSIGN_OR_RETURN(const Tensor device_targets,
                        IndicesOnDevice(targets, x.device()));
    DT_RETURN_IF_ERROR(LaunchOn(x, "ScatterAdd", [&](cudaStream_t stream) {
      return LaunchScatterAdd(ToScalarType(src.dtype()), src.raw_data(),
                              device_targets.data<int64_t>(), acc.raw_data(),
                              shape, acc.strides()[dim],
                              static_cast<int64_t>(targets.size()), stream);
    }));
  }
  return RoundedTo(acc, x.dtype());
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
