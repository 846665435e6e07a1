#include "dtensor/nn/optim_sgd.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<Sgd>> Sgd::Create(std::vector<DTensor> params,
                                                 const SgdOptions& options) {
  const std::pair<const char*, double> values[] = {
      {"learning rate", options.learning_rate},
      {"momentum", options.momentum},
      {"dampening", options.dampening},
      {"weight decay", options.weight_decay}};
  DT_RETURN_IF_ERROR(CheckNonNegative("SGD", values));
  if (options.nesterov && (options.momentum == 0 || options.dampening != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ",
        options.momentum, " and dampening ", options.dampening));
  }
  return std::unique_ptr<Sgd>(new Sgd(std::move(params), options));
}

Sgd::Sgd(std::vector<DTensor> params, const SgdOptions& options)
    : Optimizer(std::move(params), options.learning_rate),
      options_(options),
      buffers_(this->params().size()) {}

absl::Status Sgd::Update(size_t i, const Tensor& grad) {
  const Tensor& p = params()[i].ToLocal();
  Tensor d = grad;
  if (options_.weight_decay != 0) {
    DT_ASSIGN_OR_RETURN(Tensor decay, Mul(p, options_.weight_decay));
    DT_ASSIGN_OR_RETURN(d, Add(d, decay));
  }
  if (options_.momentum != 0) {
    DTensor& buffer = buffers_[i];
    if (!buffer.defined()) {
      DT_ASSIGN_OR_RETURN(buffer, ZerosLikeParam(i));
      DT_RETURN_IF_ERROR(Assign(buffer.ToLocal(), d));
    } else {
      DT_ASSIGN_OR_RETURN(Tensor kept,
                          Mul(buffer.ToLocal(), options_.momentum));
      DT_ASSIGN_OR_RETURN(Tensor added, Mul(d, 1 - options_.dampening));
      DT_ASSIGN_OR_RETURN(Tensor next, Add(kept, added));
      DT_RETURN_IF_ERROR(Assign(buffer.ToLocal(), next));
    }
    if (options_.nesterov) {
      DT_ASSIGN_OR_RETURN(Tensor ahead,
                          Mul(buffer.ToLocal(), options_.momentum));
      DT_ASSIGN_OR_RETURN(d, Add(d, ahead));
    } else {
      d = buffer.ToLocal();
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor step, Mul(d, learning_rate()));
  DT_ASSIGN_OR_RETURN(Tensor updated, Sub(p, step));
  return Assign(p, updated);
}

}  // namespace nn
}  // namespace dtensor
