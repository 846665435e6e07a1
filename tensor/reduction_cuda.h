#ifndef DTENSOR_TENSOR_REDUCTION_CUDA_H_
#define DTENSOR_TENSOR_REDUCTION_CUDA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// The reductions of reduction.h on CUDA tensors (cuda_entry.h).
namespace dtensor::cuda {

// Sum (mean when `mean`), max, min or sum of squares (floating x, an f64
// result as reduction.cc's SumOfSquares; one fused pass) over `dims` (empty:
// all).
absl::StatusOr<Tensor> ReduceOnDevice(ReduceOp op, bool mean,
                                      absl::string_view name, const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      bool keepdim);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_REDUCTION_CUDA_H_
