// The nn functions on CUDA tensors (nn_functional_cuda.h): launches of
// dtensor/tensor/cuda/nn_functional_kernels.h, and of index_kernels.h for the
// embedding and its backward.
#include "dtensor/tensor/nn_functional_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/index_kernels.h"
#include "dtensor/tensor/cuda/nn_functional_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

absl::StatusOr<Tensor> SoftmaxOnDevice(const Tensor& x, int64_t dim, bool log) {
#ifdef DTENSOR_CUDA
  const char* op = log ? "LogSoftmax" : "Softmax";
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, op, "x"));
  DT_ASSIGN_OR_RETURN(const int64_t d,
                      NormalizeDim(dim, std::max<int64_t>(x.dim(), 1)));
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    (i < d ? outer : i == d ? n : inner) *= x.size(i);
  }
  return LaunchLike(x, op,
                    [&](const void* input, void* out, cudaStream_t stream) {
                      return LaunchSoftmax(ToScalarType(x.dtype()), input, out,
                                           outer, n, inner, log, stream);
                    });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> EmbeddingOnDevice(const Tensor& indices,
                                         const Tensor& table) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(table, "Embedding", "table"));
  if (table.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Embedding: table must be [num, dim], got shape ",
                     ShapeToString(table.shape())));
  }
  // CUDA indices are checked on the device, deferred (index_checks.h).
  DT_ASSIGN_OR_RETURN(
      const Tensor device_indices,
      CheckedIndicesOn(indices, table.size(0), table.device(), "Embedding"));
  const int64_t count = device_indices.numel();
  DT_ASSIGN_OR_RETURN(const Tensor source, ContiguousOnDevice(table));
  Shape out_shape = indices.shape();
  out_shape.push_back(table.size(1));
  if (table.size(0) == 0) {
    // No row to read (every index is out of range, which the check reports).
    return Tensor::Zeros(out_shape, table.dtype(), table.device());
  }
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(out_shape, table.dtype(), table.device()));
  return LaunchInto(out, "Embedding", [&](cudaStream_t stream) {
    return LaunchEmbedding(ToScalarType(table.dtype()),
                           device_indices.data<int64_t>(), source.raw_data(),
                           out.raw_data(), count, table.size(1), table.size(0),
                           stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> EmbeddingBackwardOnDevice(const Tensor& indices,
                                                 const Tensor& grad,
                                                 int64_t table_rows,
                                                 int64_t first_row,
                                                 int64_t num_rows) {
#ifdef DTENSOR_CUDA
  const int64_t width = grad.size(-1);
  DT_ASSIGN_OR_RETURN(const Tensor device_indices,
                      CheckedIndicesOn(indices, table_rows, grad.device(),
                                       "EmbeddingBackward"));
  const int64_t count = device_indices.numel();
  if (count == 0 || width == 0 || num_rows == 0) {
    return Tensor::Zeros({num_rows, width}, grad.dtype(), grad.device());
  }
  DT_ASSIGN_OR_RETURN(const Tensor source, ContiguousOnDevice(grad));
  // The scratch size is asked on the launch's device (LaunchOn makes it
  // current); it comes from the caching allocator, stream-ordered.
  size_t scratch_bytes = 0;
  DT_RETURN_IF_ERROR(LaunchOn(grad, "EmbeddingBackward", [&](cudaStream_t) {
    return EmbeddingBackwardScratchBytes(count, num_rows, &scratch_bytes);
  }));
  DT_ASSIGN_OR_RETURN(
      const Tensor scratch,
      Tensor::Empty({static_cast<int64_t>((scratch_bytes + 7) / 8)},
                    DType::kI64, grad.device()));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty({num_rows, width}, grad.dtype(),
                                                grad.device()));
  return LaunchInto(out, "EmbeddingBackward", [&](cudaStream_t stream) {
    return LaunchEmbeddingBackward(
        ToScalarType(grad.dtype()), source.raw_data(),
        device_indices.data<int64_t>(), out.raw_data(), count, width, first_row,
        num_rows, scratch.raw_data(), scratch_bytes, stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> RotaryOnDevice(const Tensor& x, const Tensor& cos_table,
                                      const Tensor& sin_table) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, "RotaryEmbedding", "x"));
  const int64_t seq = x.size(-3);
  const int64_t heads = x.size(-2);
  const int64_t half = x.size(-1) / 2;
  for (const Tensor* table : {&cos_table, &sin_table}) {
    if (table->dtype() != DType::kF64 || table->shape() != Shape{seq, half} ||
        !table->is_contiguous() || table->device() != x.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RotaryEmbedding: the angle tables must be contiguous f64 [", seq,
          ", ", half, "] on ", x.device().ToString(), ", got ",
          std::string(DTypeName(table->dtype())), " ",
          ShapeToString(table->shape()), " on ", table->device().ToString()));
    }
  }
  const int64_t row = seq * heads * 2 * half;
  const int64_t outer = row == 0 ? 0 : x.numel() / row;
  return LaunchLike(x, "RotaryEmbedding",
                    [&](const void* input, void* out, cudaStream_t stream) {
                      return LaunchRotary(
                          ToScalarType(x.dtype()), input, out,
                          static_cast<const double*>(cos_table.raw_data()),
                          static_cast<const double*>(sin_table.raw_data()),
                          outer, seq, heads, half, stream);
                    });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> DropoutOnDevice(const Tensor& x, double p, uint64_t seed,
                                       uint64_t base,
                                       const Strides& position_strides) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, "Dropout", "x"));
  if (!(p >= 0 && p < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: p ", p, " is outside [0, 1)"));
  }
  if (position_strides.size() != x.shape().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: ", position_strides.size(),
                     " position strides for x ", ShapeToString(x.shape())));
  }
  DT_ASSIGN_OR_RETURN(const StridedShape<1> positions,
                      Coalesce<1>(x.shape(), {&position_strides}, "Dropout"));
  return LaunchLike(
      x, "Dropout", [&](const void* input, void* out, cudaStream_t stream) {
        return LaunchDropout(ToScalarType(x.dtype()), input, out, positions,
                             base, seed, p, 1.0 / (1.0 - p), x.numel(), stream);
      });
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
