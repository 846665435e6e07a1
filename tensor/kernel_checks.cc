#include "dtensor/tensor/kernel_checks.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"

namespace dtensor::internal {

absl::Status CheckCpu(const Tensor& t, absl::string_view op,
                      absl::string_view arg) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " is an undefined tensor"));
  }
  if (!t.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " is on ", t.device().ToString(),
                     "; this kernel runs on the CPU"));
  }
  return absl::OkStatus();
}

absl::Status CheckOn(const Tensor& t, Device device, absl::string_view op,
                     absl::string_view arg) {
  if (device.is_cpu()) return CheckCpu(t, op, arg);
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " is an undefined tensor"));
  }
  if (t.device() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " is on ", t.device().ToString(),
                     ", the other operands on ", device.ToString()));
  }
  return absl::OkStatus();
}

absl::Status CheckFloatingDType(const Tensor& t, absl::string_view op,
                                absl::string_view arg) {
  if (IsFloatingPoint(t.dtype())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", arg, " has dtype ", std::string(DTypeName(t.dtype())),
      "; a floating dtype (f32, f64, bf16, f16) is required"));
}

absl::Status CheckFloatingCpu(const Tensor& t, absl::string_view op,
                              absl::string_view arg) {
  if (absl::Status status = CheckCpu(t, op, arg); !status.ok()) return status;
  return CheckFloatingDType(t, op, arg);
}

absl::Status CheckFloatingOn(const Tensor& t, Device device,
                             absl::string_view op, absl::string_view arg) {
  DT_RETURN_IF_ERROR(CheckOn(t, device, op, arg));
  return CheckFloatingDType(t, op, arg);
}

absl::Status CheckSameDType(const Tensor& a, const Tensor& b,
                            absl::string_view op, absl::string_view arg_a,
                            absl::string_view arg_b) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", arg_a, " (", std::string(DTypeName(a.dtype())), ") and ", arg_b,
      " (", std::string(DTypeName(b.dtype())), ") differ in dtype"));
}

absl::Status CheckNormInput(const Tensor& x, absl::string_view op) {
  DT_RETURN_IF_ERROR(
      CheckFloatingOn(x, x.defined() ? x.device() : Device::CPU(), op, "x"));
  if (x.dim() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x needs at least 1 dim, got shape []"));
  }
  return absl::OkStatus();
}

absl::Status CheckLikeNormInput(const Tensor& x, const Tensor& t,
                                absl::string_view op, absl::string_view arg) {
  DT_RETURN_IF_ERROR(CheckFloatingOn(t, x.device(), op, arg));
  DT_RETURN_IF_ERROR(CheckSameDType(x, t, op, "x", arg));
  if (t.shape() != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " has shape ", ShapeToString(t.shape()),
                     ", x has shape ", ShapeToString(x.shape())));
  }
  return absl::OkStatus();
}

absl::Status CheckNormParam(const Tensor& x, const Tensor& param,
                            absl::string_view op, absl::string_view arg) {
  if (!param.defined()) return absl::OkStatus();
  DT_RETURN_IF_ERROR(CheckFloatingOn(param, x.device(), op, arg));
  DT_RETURN_IF_ERROR(CheckSameDType(x, param, op, "x", arg));
  if (param.dim() != 1 || param.size(0) != x.size(-1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " ", ShapeToString(param.shape()),
        " does not match the last dim of x ", ShapeToString(x.shape())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& index,
                                                 absl::string_view op,
                                                 absl::string_view arg) {
  if (!index.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " is an undefined tensor"));
  }
  if (index.dtype() != DType::kI32 && index.dtype() != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " has dtype ", std::string(DTypeName(index.dtype())),
        "; i32 or i64 is required"));
  }
  return index.ToVector<int64_t>();
}

absl::Status CheckIndexInRange(int64_t index, int64_t bound,
                               absl::string_view op) {
  if (index >= 0 && index < bound) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": index ", index, " is out of range [0, ", bound, ")"));
}

absl::Status CheckCrossEntropyShapes(const Tensor& logits,
                                     const Tensor& target) {
  if (logits.dim() >= 1 && logits.dim() <= 2 &&
      target.dim() == logits.dim() - 1 &&
      (logits.dim() == 1 || target.size(0) == logits.size(0))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "CrossEntropy: logits ", ShapeToString(logits.shape()), " and target ",
      ShapeToString(target.shape()), " must be [N, C] and [N], or [C] and []"));
}

absl::Status CheckCrossEntropyTargets(absl::Span<const int64_t> targets,
                                      int64_t classes, int64_t ignore_index) {
  for (const int64_t t : targets) {
    if (t != ignore_index) {
      DT_RETURN_IF_ERROR(CheckIndexInRange(t, classes, "CrossEntropy"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dtensor::internal
