#include "dtensor/tensor/adamw_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/adamw_cuda.h"
#include "dtensor/tensor/blocked_loop.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/adamw_body.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/strided_loop.h"

namespace dtensor {
namespace {

constexpr char kOp[] = "AdamWStep";

// The constants for bodies' storage type T.
template <typename T>
using Coefficients = cuda::AdamWCoefficients<cuda::Compute<T>>;

// The step over `count` contiguous elements of each operand; __restrict and
// blocks let the compiler vectorize it (dtensor/tensor/blocked_loop.h).
template <typename T>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void AdamWRun(
    T* __restrict p, T* __restrict m, T* __restrict v, const T* __restrict g,
    int64_t count, const Coefficients<T>& k) {
  ForEachIndexInBlocks(count, [&](int64_t i) {
    cuda::AdamWElement(p + i, m + i, v + i, g + i, k);
  });
}

// The step over the operands as laid out (a shard may be a strided view);
// T is the bodies' storage type.
template <typename T>
void AdamWKernel(const Tensor& param, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& grad,
                 const Coefficients<T>& k) {
  T* const p = static_cast<T*>(param.raw_data());
  T* const m = static_cast<T*>(exp_avg.raw_data());
  T* const v = static_cast<T*>(exp_avg_sq.raw_data());
  const T* const g = static_cast<const T*>(grad.raw_data());
  ForEachStridedRun<4>(
      param.shape(),
      {param.strides(), exp_avg.strides(), exp_avg_sq.strides(),
       grad.strides()},
      {0, 0, 0, 0},
      [&](const OperandOffsets<4>& at, const OperandOffsets<4>& steps,
          int64_t count) {
        if (steps == OperandOffsets<4>{1, 1, 1, 1}) {
          AdamWRun(p + at[0], m + at[1], v + at[2], g + at[3], count, k);
          return;
        }
        for (int64_t i = 0; i < count; ++i) {
          cuda::AdamWElement(p + at[0] + i * steps[0], m + at[1] + i * steps[1],
                             v + at[2] + i * steps[2], g + at[3] + i * steps[3],
                             k);
        }
      });
}

// `t` is a floating tensor on the CPU, or on param's device when that is a
// CUDA device.
absl::Status CheckDeviceAndDType(const Tensor& t, const Tensor& param,
                                 const char* name) {
  if (!cuda::OnCuda(param)) return internal::CheckFloatingCpu(t, kOp, name);
  if (!t.defined() || t.device() != param.device() ||
      !IsFloatingPoint(t.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", name, " must be a floating tensor on ",
                     param.device().ToString(), " (the param's device)"));
  }
  return absl::OkStatus();
}

absl::Status CheckOperand(const Tensor& t, const Tensor& param,
                          const char* name) {
  DT_RETURN_IF_ERROR(CheckDeviceAndDType(t, param, name));
  DT_RETURN_IF_ERROR(internal::CheckSameDType(param, t, kOp, "param", name));
  if (t.shape() != param.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", name, " has shape ", ShapeToString(t.shape()),
                     ", param ", ShapeToString(param.shape())));
  }
  return absl::OkStatus();
}

// AdamWStep's checks, in its order.
absl::Status CheckOperands(const Tensor& param, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const Tensor& grad,
                           int64_t step) {
  DT_RETURN_IF_ERROR(CheckOperand(param, param, "param"));
  DT_RETURN_IF_ERROR(CheckOperand(exp_avg, param, "exp_avg"));
  DT_RETURN_IF_ERROR(CheckOperand(exp_avg_sq, param, "exp_avg_sq"));
  DT_RETURN_IF_ERROR(CheckOperand(grad, param, "grad"));
  if (param.raw_data() == exp_avg.raw_data() ||
      param.raw_data() == exp_avg_sq.raw_data() ||
      exp_avg.raw_data() == exp_avg_sq.raw_data()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": param, exp_avg and exp_avg_sq must be distinct buffers"));
  }
  if (step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": step ", step, " must be >= 1"));
  }
  return absl::OkStatus();
}

cuda::AdamWCoefficients<double> CoefficientsOf(const AdamWOptions& options,
                                               int64_t step) {
  return cuda::AdamWCoefficientsOf(options.learning_rate, options.beta1,
                                   options.beta2, options.eps,
                                   options.weight_decay, step);
}

// The step of checked CPU operands.
void StepOnCpu(const Tensor& param, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& grad,
               const cuda::AdamWCoefficients<double>& k) {
  internal::DispatchFloatingDType(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AdamWKernel<typename BodyStorage<T>::type>(
        param, exp_avg, exp_avg_sq, grad,
        cuda::CoefficientsIn<ComputeType<T>>(k));
  });
}

// The entries of AdamWStepMany that one launch (on CUDA) can step: the same
// device, dtype and step, in their order.
struct Group {
  Device device;
  DType dtype;
  int64_t step;
  std::vector<const AdamWOperands*> members;
};

std::vector<Group> GroupsOf(absl::Span<const AdamWOperands> params) {
  std::vector<Group> groups;
  for (const AdamWOperands& entry : params) {
    const Device device = entry.param.device();
    const DType dtype = entry.param.dtype();
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.device == device && g.dtype == dtype && g.step == entry.step;
    });
    if (it == groups.end()) {
      it = groups.insert(groups.end(), Group{device, dtype, entry.step, {}});
    }
    it->members.push_back(&entry);
  }
  return groups;
}

// Each entry's operands as AdamWStep checks them, then no buffer written by
// two entries (an empty tensor writes nothing).
absl::Status CheckEntries(absl::Span<const AdamWOperands> params) {
  std::unordered_map<const void*, size_t> writer;
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamWOperands& e = params[i];
    const absl::Status status =
        CheckOperands(e.param, e.exp_avg, e.exp_avg_sq, e.grad, e.step);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("AdamWStepMany: parameter ", i, ": ", status.message()));
    }
    if (e.param.numel() == 0) continue;
    const std::pair<const char*, const Tensor*> written[] = {
        {"param", &e.param},
        {"exp_avg", &e.exp_avg},
        {"exp_avg_sq", &e.exp_avg_sq}};
    for (const auto& [name, t] : written) {
      const auto [it, inserted] = writer.emplace(t->raw_data(), i);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat("AdamWStepMany: parameter ", i, ": ", name,
                         " shares its buffer with parameter ", it->second));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AdamWStep(const Tensor& param, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const Tensor& grad,
                       const AdamWOptions& options, int64_t step) {
  DT_RETURN_IF_ERROR(CheckOperands(param, exp_avg, exp_avg_sq, grad, step));
  const cuda::AdamWCoefficients<double> k = CoefficientsOf(options, step);
  if (cuda::OnCuda(param)) {
    return cuda::AdamWStepOnDevice(param, exp_avg, exp_avg_sq, grad, k);
  }
  StepOnCpu(param, exp_avg, exp_avg_sq, grad, k);
  return absl::OkStatus();
}

absl::Status AdamWStepMany(absl::Span<const AdamWOperands> params,
                           const AdamWOptions& options) {
  DT_RETURN_IF_ERROR(CheckEntries(params));
  for (const Group& group : GroupsOf(params)) {
    const cuda::AdamWCoefficients<double> k =
        CoefficientsOf(options, group.step);
    if (group.device.is_cuda()) {
      DT_RETURN_IF_ERROR(cuda::AdamWStepManyOnDevice(group.members, k));
      continue;
    }
    for (const AdamWOperands* e : group.members) {
      StepOnCpu(e->param, e->exp_avg, e->exp_avg_sq, e->grad, k);
    }
  }
  return absl::OkStatus();
}

}  // namespace dtensor
