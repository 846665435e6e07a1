// RmsNorm, LayerNorm and their backward on CUDA tensors (norm_cuda.h):
// launches of dtensor/tensor/cuda/norm_kernels.h over contiguous rows.
#include "dtensor/tensor/norm_cuda.h"

#include <utility>

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/norm_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

// `param` (undefined, or [size] of x's dtype on x's device) made contiguous;
// undefined when `param` is.
absl::StatusOr<Tensor> NormParam(const Tensor& x, const Tensor& param,
                                 absl::string_view op, absl::string_view arg) {
  if (!param.defined()) return Tensor();
  DT_RETURN_IF_ERROR(internal::CheckNormParam(x, param, op, arg));
  return ContiguousOnDevice(param);
}

const void* DataOrNull(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

// The number of rows of the last dim of `x` (0 when that dim is empty).
int64_t NormRows(const Tensor& x) {
  return x.size(-1) == 0 ? 0 : x.numel() / x.size(-1);
}

}  // namespace
#endif

absl::StatusOr<Tensor> RmsNormOnDevice(const Tensor& x, const Tensor& weight,
                                       double eps) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckNormInput(x, "RmsNorm"));
  DT_ASSIGN_OR_RETURN(const Tensor w,
                      NormParam(x, weight, "RmsNorm", "weight"));
  return LaunchLike(
      x, "RmsNorm", [&](const void* input, void* out, cudaStream_t stream) {
        return LaunchRmsNorm(ToScalarType(x.dtype()), input, DataOrNull(w), out,
                             NormRows(x), x.size(-1), eps, stream);
      });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> LayerNormOnDevice(const Tensor& x, const Tensor& weight,
                                         const Tensor& bias, double eps) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckNormInput(x, "LayerNorm"));
  DT_ASSIGN_OR_RETURN(const Tensor w,
                      NormParam(x, weight, "LayerNorm", "weight"));
  DT_ASSIGN_OR_RETURN(const Tensor b, NormParam(x, bias, "LayerNorm", "bias"));
  return LaunchLike(
      x, "LayerNorm", [&](const void* input, void* out, cudaStream_t stream) {
        return LaunchLayerNorm(ToScalarType(x.dtype()), input, DataOrNull(w),
                               DataOrNull(b), out, NormRows(x), x.size(-1), eps,
                               stream);
      });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<std::pair<Tensor, Tensor>> AddRmsNormOnDevice(
    const Tensor& residual, const Tensor& delta, const Tensor& weight,
    double eps) {
#ifdef DTENSOR_CUDA
  const Device device = residual.device();
  DT_ASSIGN_OR_RETURN(const Tensor r, ContiguousOnDevice(residual));
  DT_ASSIGN_OR_RETURN(const Tensor d, ContiguousOnDevice(delta));
  DT_ASSIGN_OR_RETURN(const Tensor w,
                      NormParam(residual, weight, "AddRmsNorm", "weight"));
  DT_ASSIGN_OR_RETURN(
      Tensor sum, Tensor::Empty(residual.shape(), residual.dtype(), device));
  DT_ASSIGN_OR_RETURN(
      Tensor normed, Tensor::Empty(residual.shape(), residual.dtype(), device));
  DT_RETURN_IF_ERROR(LaunchOn(residual, "AddRmsNorm", [&](cudaStream_t stream) {
    return LaunchAddRmsNorm(ToScalarType(residual.dtype()), r.raw_data(),
                            d.raw_data(), DataOrNull(w), sum.raw_data(),
                            normed.raw_data(), NormRows(residual),
                            residual.size(-1), eps, stream);
  }));
  return std::make_pair(std::move(sum), std::move(normed));
#else
  return NotBuilt();
#endif
}

absl::StatusOr<NormGrads> NormBackwardOnDevice(const Tensor& x,
                                               const Tensor& weight,
                                               const Tensor& grad, double eps,
                                               bool layer_norm, bool want_dbias,
                                               const Tensor& residual_grad) {
#ifdef DTENSOR_CUDA
  const char* op = layer_norm ? "LayerNormBackward" : "RmsNormBackward";
  const int64_t width = x.size(-1);
  const int64_t rows = NormRows(x);
  // Sums over no rows are zeros; otherwise the kernels write every element.
  const auto param_grad = [&] {
    return rows == 0 ? Tensor::Zeros({width}, x.dtype(), x.device())
                     : Tensor::Empty({width}, x.dtype(), x.device());
  };
  NormGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dx,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  if (weight.defined()) {
    DT_ASSIGN_OR_RETURN(grads.dweight, param_grad());
  }
  if (want_dbias) {
    DT_ASSIGN_OR_RETURN(grads.dbias, param_grad());
  }
  if (rows == 0) return grads;
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(const Tensor g, ContiguousOnDevice(grad));
  DT_ASSIGN_OR_RETURN(const Tensor w, NormParam(x, weight, op, "weight"));
  Tensor addend;
  if (residual_grad.defined()) {
    DT_ASSIGN_OR_RETURN(addend, ContiguousOnDevice(residual_grad));
  }
  // Scratch: each row's (mean, r), and the chunks' partial sums.
  DT_ASSIGN_OR_RETURN(const Tensor stats,
                      Tensor::Empty({rows, 2}, DType::kF64, x.device()));
  Tensor partials;
  if (weight.defined() || want_dbias) {
    DT_ASSIGN_OR_RETURN(
        partials, Tensor::Empty({2, NormParamChunks(rows), width}, DType::kF64,
                                x.device()));
  }
  NormBackwardArgs args;
  args.x = input.raw_data();
  args.grad = g.raw_data();
  args.weight = DataOrNull(w);
  args.addend = DataOrNull(addend);
  args.dx = grads.dx.raw_data();
  args.dweight = grads.dweight.defined() ? grads.dweight.raw_data() : nullptr;
  args.dbias = grads.dbias.defined() ? grads.dbias.raw_data() : nullptr;
  args.stats = static_cast<NormStats*>(stats.raw_data());
  args.partials =
      partials.defined() ? static_cast<double*>(partials.raw_data()) : nullptr;
  args.rows = rows;
  args.width = width;
  args.eps = eps;
  args.layer_norm = layer_norm;
  DT_RETURN_IF_ERROR(LaunchOn(x, op, [&](cudaStream_t stream) {
    return LaunchNormBackward(ToScalarType(x.dtype()), args, stream);
  }));
  return grads;
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
