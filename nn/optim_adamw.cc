#include "dtensor/nn/optim_adamw.h"

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/op_profile.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<AdamW>> AdamW::Create(
    std::vector<DTensor> params, const AdamWOptions& options) {
  const std::pair<const char*, double> nonnegative[] = {
      {"learning rate", options.learning_rate},
      {"eps", options.eps},
      {"weight decay", options.weight_decay}};
  DT_RETURN_IF_ERROR(CheckNonNegative("AdamW", nonnegative));
  for (double beta : {options.beta1, options.beta2}) {
    if (!(beta >= 0 && beta < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("AdamW: beta ", beta, " is outside [0, 1)"));
    }
  }
  return std::unique_ptr<AdamW>(new AdamW(std::move(params), options));
}

AdamW::AdamW(std::vector<DTensor> params, const AdamWOptions& options)
    : Optimizer(std::move(params), options.learning_rate),
      options_(options),
      exp_avg_(this->params().size()),
      exp_avg_sq_(this->params().size()),
      steps_(this->params().size()) {
  for (Tensor& step : steps_) step = Tensor::Scalar(0, DType::kI64);
}

std::vector<int64_t> AdamW::steps() const {
  std::vector<int64_t> steps;
  steps.reserve(steps_.size());
  for (const Tensor& step : steps_) steps.push_back(step.data<int64_t>()[0]);
  return steps;
}

absl::Status AdamW::MaterializeState() {
  for (size_t i = 0; i < params().size(); ++i) {
    if (exp_avg_[i].defined()) continue;
    const DTensor& param = params()[i];
    if (param.runtime()->metadata_only()) {
      DT_ASSIGN_OR_RETURN(exp_avg_[i],
                          DTensor::FromSpec(param.runtime(), param.spec()));
      DT_ASSIGN_OR_RETURN(exp_avg_sq_[i],
                          DTensor::FromSpec(param.runtime(), param.spec()));
      continue;
    }
    DT_ASSIGN_OR_RETURN(exp_avg_[i], ZerosLikeParam(i));
    DT_ASSIGN_OR_RETURN(exp_avg_sq_[i], ZerosLikeParam(i));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::btree_map<std::string, DTensor>> AdamW::State(
    absl::Span<const std::string> param_names) {
  if (param_names.size() != params().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW state: ", param_names.size(), " names for ",
                     params().size(), " parameters"));
  }
  DT_RETURN_IF_ERROR(MaterializeState());
  absl::btree_map<std::string, DTensor> state;
  for (size_t i = 0; i < params().size(); ++i) {
    const std::string& name = param_names[i];
    const DTensor& param = params()[i];
    DT_ASSIGN_OR_RETURN(
        DTensorSpec step_spec,
        DTensorSpec::Create(
            param.mesh(),
            std::vector<Placement>(param.mesh().ndim(), Placement::Replicate()),
            {}, DType::kI64));
    const Tensor step = param.runtime()->metadata_only() ? Tensor() : steps_[i];
    const std::pair<std::string, DTensor> entries[] = {
        {name + ".exp_avg", exp_avg_[i]},
        {name + ".exp_avg_sq", exp_avg_sq_[i]},
        {name + ".step",
         DTensor::WrapUnchecked(
             param.runtime(),
             std::make_shared<const DTensorSpec>(std::move(step_spec)), step)}};
    for (const auto& [key, tensor] : entries) {
      if (!state.emplace(key, tensor).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("AdamW state: the key \"", key, "\" repeats"));
      }
    }
  }
  return state;
}

absl::Status AdamW::Update(size_t i, const Tensor& grad) {
  return UpdateMany({&i, 1}, {&grad, 1});
}

absl::Status AdamW::UpdateMany(absl::Span<const size_t> indices,
                               absl::Span<const Tensor> grads) {
  std::vector<AdamWOperands> operands;
  operands.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    if (!exp_avg_[i].defined()) {
      DT_ASSIGN_OR_RETURN(exp_avg_[i], ZerosLikeParam(i));
      DT_ASSIGN_OR_RETURN(exp_avg_sq_[i], ZerosLikeParam(i));
    }
    operands.push_back({params()[i].ToLocal(), exp_avg_[i].ToLocal(),
                        exp_avg_sq_[i].ToLocal(), grads[k],
                        steps_[i].data<int64_t>()[0] + 1});
  }
  AdamWOptions now = options_;
  now.learning_rate = learning_rate();
  // The update is a local kernel, not a dispatched op: profiled here.
  std::optional<OpProfile> profile;
  if (Profiler::Active()) profile = OpProfile::Start("optimizer_update", grads);
  DT_RETURN_IF_ERROR(AdamWStepMany(operands, now));
  if (profile.has_value()) profile->Finish(0, 0);
  for (size_t i : indices) ++steps_[i].data<int64_t>()[0];
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
