#include "dtensor/tensor/norm_backward.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/norm_body.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/norm_cuda.h"

namespace dtensor {
namespace {

using cuda::NormStats;

absl::Status CheckNormBackward(const Tensor& x, const Tensor& weight,
                               const Tensor& grad_out,
                               const Tensor& residual_grad, const char* op) {
  DT_RETURN_IF_ERROR(internal::CheckNormInput(x, op));
  DT_RETURN_IF_ERROR(internal::CheckNormParam(x, weight, op, "weight"));
  DT_RETURN_IF_ERROR(internal::CheckLikeNormInput(x, grad_out, op, "grad_out"));
  if (!residual_grad.defined()) return absl::OkStatus();
  return internal::CheckLikeNormInput(x, residual_grad, op, "residual_grad");
}

// The CPU kernel over `rows` contiguous rows of `width` > 0 (T the bodies'
// storage type): dx (plus `addend`'s rows unless null), and the parameter
// gradients' sums added row after row into `dweight_sum` and `dbias_sum`
// (zeroed, [width]; null: not wanted).
template <typename T>
void NormBackwardRows(const T* x, const T* grad, const T* weight,
                      const T* addend, T* dx, double* dweight_sum,
                      double* dbias_sum, int64_t rows, int64_t width,
                      double eps, bool layer_norm) {
  for (int64_t r = 0; r < rows; ++r) {
    const cuda::Row<T> x_row{x + r * width, width, 1};
    const cuda::Row<T> g_row{grad + r * width, width, 1};
    const double mean = layer_norm ? cuda::ReducePartial<double>(
                                         cuda::ReduceOp::kSum, x_row, 0, 1) /
                                         width
                                   : 0.0;
    const NormStats s = cuda::NormStatsOf(
        mean, cuda::CenteredSquaresPartial(x_row, mean, 0, 1), width, eps);
    const cuda::NormDots dots =
        cuda::NormDotsPartial(x_row, g_row, weight, s, 0, 1);
    cuda::NormBackwardWrite(x_row, g_row, weight, s, dots, layer_norm,
                            dx + r * width, 0, 1,
                            addend == nullptr ? nullptr : addend + r * width);
    cuda::NormParamGradsAddRow(x_row, g_row, s, dweight_sum, dbias_sum, 0, 1);
  }
}

// `sums` rounded to `dtype`, or an undefined tensor when `wanted` is false.
absl::StatusOr<Tensor> ParamGrad(bool wanted, const std::vector<double>& sums,
                                 DType dtype) {
  if (!wanted) return Tensor();
  DT_ASSIGN_OR_RETURN(
      const Tensor exact,
      Tensor::FromVector<double>(sums, {static_cast<int64_t>(sums.size())}));
  return exact.To(dtype);
}

absl::StatusOr<NormGrads> NormBackwardOnCpu(const Tensor& x,
                                            const Tensor& weight,
                                            const Tensor& grad_out, double eps,
                                            bool layer_norm, bool want_dbias,
                                            const Tensor& residual_grad) {
  const int64_t width = x.size(-1);
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  const Tensor input = x.Contiguous();
  const Tensor grad = grad_out.Contiguous();
  const Tensor w = weight.defined() ? weight.Contiguous() : Tensor();
  const Tensor addend =
      residual_grad.defined() ? residual_grad.Contiguous() : Tensor();
  NormGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dx, Tensor::Empty(x.shape(), x.dtype()));
  std::vector<double> dweight_sum(weight.defined() ? width : 0, 0.0);
  std::vector<double> dbias_sum(want_dbias ? width : 0, 0.0);
  DispatchFloatingBodyStorage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    NormBackwardRows(
        static_cast<const T*>(input.raw_data()),
        static_cast<const T*>(grad.raw_data()),
        w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr,
        addend.defined() ? static_cast<const T*>(addend.raw_data()) : nullptr,
        static_cast<T*>(grads.dx.raw_data()),
        weight.defined() ? dweight_sum.data() : nullptr,
        want_dbias ? dbias_sum.data() : nullptr, rows, width, eps, layer_norm);
  });
  DT_ASSIGN_OR_RETURN(grads.dweight,
                      ParamGrad(weight.defined(), dweight_sum, x.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dbias, ParamGrad(want_dbias, dbias_sum, x.dtype()));
  return grads;
}

}  // namespace

absl::StatusOr<NormGrads> RmsNormBackward(const Tensor& x, const Tensor& weight,
                                          const Tensor& grad_out, double eps) {
  return NormBackward(x, weight, grad_out, eps, /*layer_norm=*/false,
                      /*want_dbias=*/false);
}

absl::StatusOr<NormGrads> LayerNormBackward(const Tensor& x,
                                            const Tensor& weight,
                                            const Tensor& bias,
                                            const Tensor& grad_out,
                                            double eps) {
  DT_RETURN_IF_ERROR(internal::CheckNormInput(x, "LayerNormBackward"));
  DT_RETURN_IF_ERROR(
      internal::CheckNormParam(x, bias, "LayerNormBackward", "bias"));
  return NormBackward(x, weight, grad_out, eps, /*layer_norm=*/true,
                      bias.defined());
}

absl::StatusOr<NormGrads> NormBackward(const Tensor& x, const Tensor& weight,
                                       const Tensor& grad_out, double eps,
                                       bool layer_norm, bool want_dbias,
                                       const Tensor& residual_grad) {
  const char* op = layer_norm ? "LayerNormBackward" : "RmsNormBackward";
  DT_RETURN_IF_ERROR(CheckNormBackward(x, weight, grad_out, residual_grad, op));
  want_dbias = layer_norm && want_dbias;
  if (cuda::OnCuda(x)) {
    return cuda::NormBackwardOnDevice(x, weight, grad_out, eps, layer_norm,
                                      want_dbias, residual_grad);
  }
  return NormBackwardOnCpu(x, weight, grad_out, eps, layer_norm, want_dbias,
                           residual_grad);
}

}  // namespace dtensor
