#include "dtensor/nn/grad_check.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/tensor/generator.h"

namespace dtensor {
namespace nn {
namespace {

absl::Status CheckReplicated(absl::Span<const DTensor> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsDifferentiable(inputs[i])) continue;
    for (const Placement& p : inputs[i].placements()) {
      if (!p.is_replicate()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "CheckGradients: input ", i, " is laid out as ",
            inputs[i].sharding().ToString(),
            "; finite differences need every floating input Replicate"));
      }
    }
  }
  return absl::OkStatus();
}

// f(inputs) . c, in double.
absl::StatusOr<double> Contract(const DifferentiableFn& fn,
                                absl::Span<const DTensor> inputs,
                                const Tensor& c) {
  DT_ASSIGN_OR_RETURN(DTensor out, fn(inputs));
  DT_ASSIGN_OR_RETURN(Tensor full, out.FullTensor());
  DT_ASSIGN_OR_RETURN(full, full.To(DType::kF64));
  full = full.Contiguous();
  double dot = 0;
  for (int64_t i = 0; i < full.numel(); ++i) {
    dot += full.data<double>()[i] * c.data<double>()[i];
  }
  return dot;
}

// `x` with element `e` (row-major) moved by `delta`.
absl::StatusOr<DTensor> Perturbed(const DTensor& x, int64_t e, double delta) {
  DT_ASSIGN_OR_RETURN(Tensor values, x.ToLocal().To(DType::kF64));
  values = values.Clone();
  values.data<double>()[e] += delta;
  DT_ASSIGN_OR_RETURN(values, values.To(x.dtype()));
  return DTensor::WrapUnchecked(x.runtime(), x.spec_ptr(), std::move(values));
}

}  // namespace

absl::Status CheckGradients(const DifferentiableFn& fn,
                            absl::Span<const DTensor> inputs,
                            const GradCheckOptions& options) {
  DT_RETURN_IF_ERROR(CheckReplicated(inputs));
  std::vector<DTensor> sources;
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsDifferentiable(inputs[i])) continue;
    sources.push_back(inputs[i]);
    checked.push_back(i);
  }

  GradientTape tape;
  DTensor out;
  {
    GradientTape::Scope scope(tape);
    DT_ASSIGN_OR_RETURN(out, fn(inputs));
  }
  Generator generator(options.seed);
  DT_ASSIGN_OR_RETURN(
      Tensor c, Tensor::Uniform(out.shape(), -1, 1, generator, DType::kF64));
  DT_ASSIGN_OR_RETURN(Tensor c_out, c.To(out.dtype()));
  GradientOptions gradient_options;
  DT_ASSIGN_OR_RETURN(gradient_options.output_gradient,
                      ops::ReplicatedConstant(out, c_out));
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                      tape.Gradient(out, sources, gradient_options));

  NoGrad not_recorded;
  std::vector<DTensor> moved(inputs.begin(), inputs.end());
  for (size_t k = 0; k < checked.size(); ++k) {
    const size_t i = checked[k];
    DT_ASSIGN_OR_RETURN(Tensor analytic, grads[k].FullTensor());
    DT_ASSIGN_OR_RETURN(analytic, analytic.To(DType::kF64));
    analytic = analytic.Contiguous();
    for (int64_t e = 0; e < inputs[i].ToLocal().numel(); ++e) {
      DT_ASSIGN_OR_RETURN(moved[i], Perturbed(inputs[i], e, options.step));
      DT_ASSIGN_OR_RETURN(const double up, Contract(fn, moved, c));
      DT_ASSIGN_OR_RETURN(moved[i], Perturbed(inputs[i], e, -options.step));
      DT_ASSIGN_OR_RETURN(const double down, Contract(fn, moved, c));
      moved[i] = inputs[i];
      const double numeric = (up - down) / (2 * options.step);
      const double tape_value = analytic.data<double>()[e];
      if (!(std::abs(tape_value - numeric) <=
            options.atol + options.rtol * std::abs(numeric))) {
        return absl::InternalError(absl::StrCat(
            "CheckGradients: input ", i, " element ", e, " (row-major): tape ",
            tape_value, ", finite difference ", numeric));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
