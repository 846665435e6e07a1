// Cross entropy's fused backward (loss_backward.h): the operands' checks, the
// CPU kernel over contiguous rows, and the CUDA entry point (loss_cuda.h).
// Both run dtensor/tensor/cuda/loss_body.h's per-element body.
#include "dtensor/tensor/loss_backward.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/loss_body.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/loss_cuda.h"

namespace dtensor {
namespace {

constexpr absl::string_view kOp = "CrossEntropyBackward";

// `t` is on `device`, of `dtype` and `shape` (errors name `arg`).
absl::Status CheckOperand(const Tensor& t, Device device, DType dtype,
                          const Shape& shape, absl::string_view arg) {
  DT_RETURN_IF_ERROR(internal::CheckOn(t, device, kOp, arg));
  if (t.dtype() != dtype || t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": ", arg, " is ", std::string(DTypeName(t.dtype())), " ",
        ShapeToString(t.shape()), "; ", std::string(DTypeName(dtype)), " ",
        ShapeToString(shape), " is required"));
  }
  return absl::OkStatus();
}

absl::Status CheckInputs(const CrossEntropyGradInputs& in, Reduction reduction,
                         int64_t class_offset) {
  const Tensor& logits = in.logits;
  if (!logits.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": logits undefined"));
  }
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(logits, kOp, "logits"));
  if (logits.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": logits ", ShapeToString(logits.shape()),
                     " must be [rows, classes]"));
  }
  if (class_offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": negative class_offset ", class_offset));
  }
  const Device device = logits.device();
  const Shape rows = {logits.size(0)};
  DT_RETURN_IF_ERROR(
      CheckOperand(in.target, device, DType::kI64, rows, "target"));
  DT_RETURN_IF_ERROR(CheckOperand(in.log_sum_exp, device,
                                  ComputeDTypeOf(logits.dtype()), rows,
                                  "log_sum_exp"));
  DT_RETURN_IF_ERROR(
      CheckOperand(in.grad, device, logits.dtype(),
                   reduction == Reduction::kNone ? rows : Shape{}, "grad"));
  if (reduction == Reduction::kMean) {
    DT_RETURN_IF_ERROR(
        CheckOperand(in.count, device, DType::kI64, Shape{}, "count"));
  }
  return absl::OkStatus();
}

// The CPU kernel, T the bodies' storage type of the logits' dtype.
template <typename T>
void GradRowsOnHost(const CrossEntropyGradInputs& in, Reduction reduction,
                    int64_t ignore_index, int64_t class_offset, T* out) {
  using C = cuda::Compute<T>;
  const int64_t rows = in.logits.size(0);
  const int64_t classes = in.logits.size(1);
  const T* x = reinterpret_cast<const T*>(in.logits.raw_data());
  const int64_t* target = in.target.data<int64_t>();
  const C* lse = reinterpret_cast<const C*>(in.log_sum_exp.raw_data());
  const T* grad = reinterpret_cast<const T*>(in.grad.raw_data());
  const int64_t* count =
      reduction == Reduction::kMean ? in.count.data<int64_t>() : nullptr;
  const bool per_row = reduction == Reduction::kNone;
  for (int64_t r = 0; r < rows; ++r) {
    const cuda::CrossEntropyGradRow<C> row = cuda::CrossEntropyGradRowOf(
        target[r], lse[r], cuda::Load(grad[per_row ? r : 0]), count,
        ignore_index, class_offset, classes);
    const T* logits = x + r * classes;
    T* grads = out + r * classes;
    for (int64_t j = 0; j < classes; ++j) {
      grads[j] = cuda::Store<T>(
          cuda::CrossEntropyGradOf(row, cuda::Load(logits[j]), j));
    }
  }
}

}  // namespace

absl::StatusOr<Tensor> CrossEntropyBackward(const CrossEntropyGradInputs& in,
                                            Reduction reduction,
                                            int64_t ignore_index,
                                            int64_t class_offset) {
  DT_RETURN_IF_ERROR(CheckInputs(in, reduction, class_offset));
  if (cuda::OnCuda(in.logits)) {
    return cuda::CrossEntropyBackwardOnDevice(in, reduction, ignore_index,
                                              class_offset);
  }
  CrossEntropyGradInputs contiguous = in;
  for (Tensor* t : {&contiguous.logits, &contiguous.target,
                    &contiguous.log_sum_exp, &contiguous.grad}) {
    *t = t->Contiguous();
  }
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(in.logits.shape(), in.logits.dtype()));
  DispatchFloatingBodyStorage(in.logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    GradRowsOnHost<T>(contiguous, reduction, ignore_index, class_offset,
                      reinterpret_cast<T*>(out.raw_data()));
  });
  return out;
}

}  // namespace dtensor
