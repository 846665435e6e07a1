#include "dtensor/nn/norms.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/layer_checks.h"
#include "dtensor/ops/norm_ops.h"

namespace dtensor {
namespace nn {
namespace {

absl::Status CheckEps(absl::string_view layer, double eps) {
  if (eps > 0 && std::isfinite(eps)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(layer, ": eps ", eps, " must be positive and finite"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RMSNorm>> RMSNorm::Create(int64_t dim,
                                                         double eps) {
  DT_RETURN_IF_ERROR(CheckPositive("RMSNorm", "dim", dim));
  DT_RETURN_IF_ERROR(CheckEps("RMSNorm", eps));
  std::unique_ptr<RMSNorm> norm(new RMSNorm(dim, eps));
  DT_ASSIGN_OR_RETURN(norm->weight_,
                      norm->AddParameter("weight", {dim}, Initializer::Ones()));
  return norm;
}

absl::StatusOr<DTensor> RMSNorm::Forward(const DTensor& x) {
  return ops::RmsNorm(x, weight(), eps_);
}

std::string RMSNorm::ExtraRepr() const {
  return absl::StrCat(dim_, ", eps=", eps_);
}

absl::StatusOr<std::unique_ptr<LayerNorm>> LayerNorm::Create(
    int64_t dim, double eps, bool elementwise_affine, bool bias) {
  DT_RETURN_IF_ERROR(CheckPositive("LayerNorm", "dim", dim));
  DT_RETURN_IF_ERROR(CheckEps("LayerNorm", eps));
  std::unique_ptr<LayerNorm> norm(new LayerNorm(dim, eps));
  if (elementwise_affine) {
    DT_ASSIGN_OR_RETURN(norm->weight_, norm->AddParameter("weight", {dim},
                                                          Initializer::Ones()));
    if (bias) {
      DT_ASSIGN_OR_RETURN(
          norm->bias_, norm->AddParameter("bias", {dim}, Initializer::Zeros()));
    }
  }
  return norm;
}

absl::StatusOr<DTensor> LayerNorm::Forward(const DTensor& x) {
  const DTensor none;
  return ops::LayerNorm(x, weight_ >= 0 ? value(weight_) : none,
                        bias_ >= 0 ? value(bias_) : none, eps_);
}

std::string LayerNorm::ExtraRepr() const {
  return absl::StrCat(dim_, ", eps=", eps_,
                      ", elementwise_affine=", weight_ >= 0 ? "true" : "false",
                      ", bias=", bias_ >= 0 ? "true" : "false");
}

}  // namespace nn
}  // namespace dtensor
