#include "dtensor/nn/optim.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/op_profile.h"

namespace dtensor {
namespace nn {

Optimizer::Optimizer(std::vector<DTensor> params, double learning_rate)
    : params_(std::move(params)), learning_rate_(learning_rate) {}

absl::Status Optimizer::Step(absl::Span<const DTensor> grads) {
  if (grads.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer step: ", grads.size(), " gradients for ",
                     params_.size(), " parameters"));
  }
  NoGrad not_recorded;
  ProfilePhaseScope phase(ProfilePhase::kOptimizer);
  std::vector<DTensor> laid_out(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    DT_ASSIGN_OR_RETURN(laid_out[i], GradientInSharding(i, grads[i]));
  }
  std::vector<size_t> indices;
  std::vector<Tensor> locals;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!laid_out[i].defined() || params_[i].runtime()->metadata_only()) {
      continue;
    }
    indices.push_back(i);
    locals.push_back(laid_out[i].ToLocal());
  }
  return UpdateMany(indices, locals);
}

absl::Status Optimizer::UpdateMany(absl::Span<const size_t> indices,
                                   absl::Span<const Tensor> grads) {
  for (size_t k = 0; k < indices.size(); ++k) {
    // The update is a local kernel, not a dispatched op: profiled here.
    std::optional<OpProfile> profile;
    if (Profiler::Active()) {
      profile = OpProfile::Start("optimizer_update", {grads[k]});
    }
    DT_RETURN_IF_ERROR(Update(indices[k], grads[k]));
    if (profile.has_value()) profile->Finish(0, 0);
  }
  return absl::OkStatus();
}

absl::StatusOr<DTensor> Optimizer::GradientInSharding(
    size_t i, const DTensor& grad) const {
  const DTensor& param = params_[i];
  if (!param.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer step: parameter ", i, " is undefined"));
  }
  for (const Placement& p : param.placements()) {
    if (p.is_partial()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer step: parameter ", i, " is Partial (",
          param.sharding().ToString(), "); parameters must be complete"));
    }
  }
  if (grad.shape() != param.shape() || grad.dtype() != param.dtype() ||
      grad.mesh() != param.mesh()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer step: gradient ", i, " ", grad.spec().ToString(),
        " does not match its parameter ", param.spec().ToString()));
  }
  if (grad.sharding() == param.sharding()) return grad;
  return grad.Redistribute(param.sharding());
}

absl::StatusOr<DTensor> Optimizer::ZerosLikeParam(size_t i) const {
  const DTensor& param = params_[i];
  DT_ASSIGN_OR_RETURN(Tensor zeros,
                      Tensor::Zeros(param.ToLocal().shape(), param.dtype(),
                                    param.ToLocal().device()));
  return DTensor::WrapUnchecked(param.runtime(), param.spec_ptr(),
                                std::move(zeros));
}

absl::Status Assign(const Tensor& target, const Tensor& values) {
  Tensor writable = target;
  return writable.CopyFrom(values);
}

absl::Status CheckNonNegative(
    absl::string_view optimizer,
    absl::Span<const std::pair<const char*, double>> options) {
  for (const auto& [name, value] : options) {
    if (!(value >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(optimizer, ": ", name, " ", value, " must be >= 0"));
    }
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
