// The reductions on CUDA tensors (reduction_cuda.h): the reduced dims
// permuted last, then one block per row
// (dtensor/tensor/cuda/reduction_kernels.h).
#include "dtensor/tensor/reduction_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/reduction_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

// Shape of a reduction's result and the permutation that puts the reduced
// dims last.
struct ReducePlan {
  std::vector<int64_t> permutation;
  Shape kept_shape;     // keepdim = false
  Shape keepdim_shape;  // keepdim = true
  int64_t rows = 1;
  int64_t n = 1;
};

absl::StatusOr<ReducePlan> PlanReduce(const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      absl::string_view op) {
  const int64_t rank = x.dim();
  std::vector<bool> reduced(std::max<int64_t>(rank, 1), dims.empty());
  for (const int64_t dim : dims) {
    DT_ASSIGN_OR_RETURN(const int64_t d,
                        NormalizeDim(dim, std::max<int64_t>(rank, 1)));
    if (reduced[d] && !dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": dim ", dim, " is repeated"));
    }
    reduced[d] = true;
  }
  ReducePlan plan;
  std::vector<int64_t> last;
  for (int64_t d = 0; d < rank; ++d) {
    plan.keepdim_shape.push_back(reduced[d] ? 1 : x.size(d));
    if (reduced[d]) {
      last.push_back(d);
      plan.n *= x.size(d);
    } else {
      plan.permutation.push_back(d);
      plan.kept_shape.push_back(x.size(d));
      plan.rows *= x.size(d);
    }
  }
  plan.permutation.insert(plan.permutation.end(), last.begin(), last.end());
  return plan;
}

}  // namespace
#endif

absl::StatusOr<Tensor> ReduceOnDevice(ReduceOp op, bool mean,
                                      absl::string_view name, const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      bool keepdim) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckOn(x, x.device(), name, "a"));
  if (mean || op == ReduceOp::kSumSquares) {
    DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, name, "a"));
  }
  DT_ASSIGN_OR_RETURN(const ReducePlan plan, PlanReduce(x, dims, name));
  if (!IsSum(op) && plan.n == 0 && plan.rows > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": cannot reduce an empty extent of shape ",
                     ShapeToString(x.shape())));
  }
  DT_ASSIGN_OR_RETURN(const Tensor permuted, x.Permute(plan.permutation));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(permuted));
  DType out_dtype = x.dtype();
  if (op == ReduceOp::kSumSquares) {
    out_dtype = DType::kF64;
  } else if (op == ReduceOp::kSum && !IsFloatingPoint(x.dtype())) {
    out_dtype = DType::kI64;
  }
  DT_ASSIGN_OR_RETURN(
      Tensor out, Tensor::Empty(keepdim ? plan.keepdim_shape : plan.kept_shape,
                                out_dtype, x.device()));
  if (plan.n == 0) {  // Sum of nothing is 0, mean of nothing NaN.
    DT_RETURN_IF_ERROR(out.Fill(mean ? std::nan("") : 0.0));
    return out;
  }
  return LaunchInto(out, name, [&](cudaStream_t stream) {
    return LaunchReduceRows(op, ToScalarType(x.dtype()),
                            ToScalarType(out_dtype), input.raw_data(),
                            out.raw_data(), plan.rows, plan.n,
                            mean ? static_cast<double>(plan.n) : 1.0, stream);
  });
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
