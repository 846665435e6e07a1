#include "dtensor/tensor/fused_norm.h"

#include <cstdint>
#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/fused_norm_body.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/norm_cuda.h"

namespace dtensor {
namespace {

constexpr char kOp[] = "AddRmsNorm";

// The CPU kernel over `rows` contiguous rows of `width` (T the bodies'
// storage type): the bodies with one lane, element by element.
template <typename T>
void AddRmsNormRows(const T* residual, const T* delta, const T* weight, T* sum,
                    T* out, int64_t rows, int64_t width, double eps) {
  using P = cuda::Pack<T, 1>;
  const P* w = reinterpret_cast<const P*>(weight);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * width;
    P* sum_row = reinterpret_cast<P*>(sum + base);
    const double squares = cuda::AddSquaresPartial(
        reinterpret_cast<const P*>(residual + base),
        reinterpret_cast<const P*>(delta + base), sum_row, width, 0, 1);
    cuda::AddRmsNormWrite(static_cast<const P*>(sum_row), w,
                          reinterpret_cast<P*>(out + base), width, squares, eps,
                          0, 1);
  }
}

absl::StatusOr<AddRmsNormOutputs> AddRmsNormOnCpu(const Tensor& residual,
                                                  const Tensor& delta,
                                                  const Tensor& weight,
                                                  double eps) {
  const int64_t width = residual.size(-1);
  const int64_t rows = width == 0 ? 0 : residual.numel() / width;
  const Tensor r = residual.Contiguous();
  const Tensor d = delta.Contiguous();
  const Tensor w = weight.defined() ? weight.Contiguous() : Tensor();
  AddRmsNormOutputs out;
  DT_ASSIGN_OR_RETURN(out.sum,
                      Tensor::Empty(residual.shape(), residual.dtype()));
  DT_ASSIGN_OR_RETURN(out.normed,
                      Tensor::Empty(residual.shape(), residual.dtype()));
  DispatchFloatingBodyStorage(residual.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AddRmsNormRows(static_cast<const T*>(r.raw_data()),
                   static_cast<const T*>(d.raw_data()),
                   w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr,
                   static_cast<T*>(out.sum.raw_data()),
                   static_cast<T*>(out.normed.raw_data()), rows, width, eps);
  });
  return out;
}

}  // namespace

absl::StatusOr<AddRmsNormOutputs> AddRmsNorm(const Tensor& residual,
                                             const Tensor& delta,
                                             const Tensor& weight, double eps) {
  DT_RETURN_IF_ERROR(internal::CheckNormInput(residual, kOp));
  DT_RETURN_IF_ERROR(
      internal::CheckLikeNormInput(residual, delta, kOp, "delta"));
  DT_RETURN_IF_ERROR(internal::CheckNormParam(residual, weight, kOp, "weight"));
  if (!cuda::OnCuda(residual)) {
    return AddRmsNormOnCpu(residual, delta, weight, eps);
  }
  DT_ASSIGN_OR_RETURN(auto outputs,
                      cuda::AddRmsNormOnDevice(residual, delta, weight, eps));
  return AddRmsNormOutputs{std::move(outputs.first), std::move(outputs.second)};
}

absl::StatusOr<NormGrads> AddRmsNormBackward(const Tensor& sum,
                                             const Tensor& weight,
                                             const Tensor& grad_normed,
                                             const Tensor& grad_sum,
                                             double eps) {
  return NormBackward(sum, weight, grad_normed, eps, /*layer_norm=*/false,
                      /*want_dbias=*/false, grad_sum);
}

}  // namespace dtensor
