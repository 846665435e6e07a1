#include "dtensor/tensor/swiglu.h"

#include <array>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/swiglu_cuda.h"

namespace dtensor {
namespace {

struct Operand {
  const Tensor* tensor;
  absl::string_view name;
};

// Every operand is defined, floating, on the first one's device, of its
// dtype and shape.
absl::Status CheckOperands(absl::string_view op,
                           std::initializer_list<Operand> operands) {
  for (const Operand& operand : operands) {
    if (!operand.tensor->defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", operand.name, " is undefined"));
    }
  }
  const Tensor& first = *operands.begin()->tensor;
  const absl::string_view first_name = operands.begin()->name;
  for (const Operand& operand : operands) {
    const Tensor& t = *operand.tensor;
    DT_RETURN_IF_ERROR(
        internal::CheckFloatingOn(t, first.device(), op, operand.name));
    DT_RETURN_IF_ERROR(
        internal::CheckSameDType(first, t, op, first_name, operand.name));
    if (t.shape() != first.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", operand.name, " has shape ", ShapeToString(t.shape()),
          " but ", first_name, " has shape ", ShapeToString(first.shape())));
    }
  }
  return absl::OkStatus();
}

template <size_t k>
using Tensors = std::array<Tensor, k>;

// Calls element(in, out, i) for i < numel with `in` the data of each of
// `inputs` made contiguous and `out` that of `kOutputs` new tensors of the
// inputs' shape and dtype; returns those.
// Errors: those of allocating the outputs.
template <typename T, size_t kOutputs, typename Element>
absl::StatusOr<Tensors<kOutputs>> RunOnCpu(std::initializer_list<Tensor> inputs,
                                           Element element) {
  std::vector<Tensor> in;
  std::vector<const T*> in_data;
  for (const Tensor& t : inputs) {
    in.push_back(t.Contiguous());
    in_data.push_back(in.back().data<T>());
  }
  Tensors<kOutputs> out;
  std::array<T*, kOutputs> out_data;
  for (size_t k = 0; k < kOutputs; ++k) {
    DT_ASSIGN_OR_RETURN(out[k], Tensor::Empty(in[0].shape(), in[0].dtype()));
    out_data[k] = out[k].template data<T>();
  }
  const int64_t numel = in[0].numel();
  for (int64_t i = 0; i < numel; ++i) element(in_data.data(), out_data, i);
  return out;
}

}  // namespace

absl::StatusOr<Tensor> SwiGlu(const Tensor& a, const Tensor& b) {
  DT_RETURN_IF_ERROR(CheckOperands("SwiGlu", {{&a, "a"}, {&b, "b"}}));
  if (cuda::OnCuda(a)) return cuda::SwiGluOnDevice(a, b);
  return internal::DispatchFloatingDType(
      a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        using C = ComputeType<T>;
        DT_ASSIGN_OR_RETURN(
            Tensors<1> out,
            (RunOnCpu<T, 1>(
                {a, b}, [](const T* const* in, const std::array<T*, 1>& out,
                           int64_t i) {
                  out[0][i] = ConvertValue<T>(cuda::SwiGluOf(
                      static_cast<C>(in[0][i]), static_cast<C>(in[1][i])));
                })));
        return std::move(out[0]);
      });
}

absl::StatusOr<SwiGluGrads> SwiGluBackward(const Tensor& grad, const Tensor& a,
                                           const Tensor& b) {
  DT_RETURN_IF_ERROR(
      CheckOperands("SwiGluBackward", {{&grad, "grad"}, {&a, "a"}, {&b, "b"}}));
  if (cuda::OnCuda(grad)) return cuda::SwiGluBackwardOnDevice(grad, a, b);
  return internal::DispatchFloatingDType(
      a.dtype(), [&](auto tag) -> absl::StatusOr<SwiGluGrads> {
        using T = decltype(tag);
        using C = ComputeType<T>;
        DT_ASSIGN_OR_RETURN(
            Tensors<2> grads,
            (RunOnCpu<T, 2>(
                {grad, a, b}, [](const T* const* in,
                                 const std::array<T*, 2>& out, int64_t i) {
                  C da, db;
                  cuda::SwiGluBackwardOf(static_cast<C>(in[0][i]),
                                         static_cast<C>(in[1][i]),
                                         static_cast<C>(in[2][i]), &da, &db);
                  out[0][i] = ConvertValue<T>(da);
                  out[1][i] = ConvertValue<T>(db);
                })));
        return SwiGluGrads{std::move(grads[0]), std::move(grads[1])};
      });
}

}  // namespace dtensor
