#include "dtensor/nn/norms.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_owner.h"
#include "dtensor/nn/layer_checks.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/norm_ops.h"

namespace dtensor {
namespace nn {
namespace {

// dim >= 1 and a positive, finite eps.
absl::Status CheckNorm(absl::string_view layer, int64_t dim, double eps) {
  DT_RETURN_IF_ERROR(CheckPositive(layer, "dim", dim));
  if (eps > 0 && std::isfinite(eps)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(layer, ": eps ", eps, " must be positive and finite"));
}

}  // namespace

absl::Status Norm::AddAffine(bool with_bias) {
  DT_ASSIGN_OR_RETURN(weight_,
                      AddParameter("weight", {dim_}, Initializer::Ones()));
  if (with_bias) {
    DT_ASSIGN_OR_RETURN(bias_,
                        AddParameter("bias", {dim_}, Initializer::Zeros()));
  }
  return absl::OkStatus();
}

std::string Norm::ExtraRepr() const {
  return absl::StrCat(dim_, ", eps=", eps_);
}

absl::StatusOr<std::unique_ptr<RMSNorm>> RMSNorm::Create(int64_t dim,
                                                         double eps) {
  DT_RETURN_IF_ERROR(CheckNorm("RMSNorm", dim, eps));
  std::unique_ptr<RMSNorm> norm(new RMSNorm(dim, eps));
  DT_RETURN_IF_ERROR(norm->AddAffine(/*with_bias=*/false));
  return norm;
}

absl::StatusOr<DTensor> RMSNorm::Forward(const DTensor& x) {
  return ops::RmsNorm(x, weight(), eps());
}

bool RMSNorm::CanFuse(const DTensor& residual, const DTensor& delta) const {
  if (has_hooks() || !residual.defined() || !delta.defined()) return false;
  if (residual.spec() != delta.spec()) return false;
  const int64_t last = static_cast<int64_t>(residual.shape().size()) - 1;
  for (const Placement& p : residual.spec().placements()) {
    if (p.is_partial()) return false;
    if (p.is_shard() && (p.dim() == last || p.dim() == -1)) return false;
  }
  return true;
}

absl::StatusOr<ops::AddNormOutputs> RMSNorm::ForwardWithResidual(
    const DTensor& residual, const DTensor& delta) {
  if (CanFuse(residual, delta)) {
    // The norm's collectives (its weight gradient's, in backward) stay this
    // module's, as in operator(); the add issues none for these operands.
    CommOwner::Scope owner(this);
    return ops::AddRmsNorm(residual, delta, weight(), eps());
  }
  ops::AddNormOutputs out;
  DT_ASSIGN_OR_RETURN(out.sum, ops::Add(residual, delta));
  DT_ASSIGN_OR_RETURN(out.normed, (*this)(out.sum));
  return out;
}

absl::StatusOr<std::unique_ptr<LayerNorm>> LayerNorm::Create(
    int64_t dim, double eps, bool elementwise_affine, bool bias) {
  DT_RETURN_IF_ERROR(CheckNorm("LayerNorm", dim, eps));
  std::unique_ptr<LayerNorm> norm(new LayerNorm(dim, eps));
  if (elementwise_affine) DT_RETURN_IF_ERROR(norm->AddAffine(bias));
  return norm;
}

absl::StatusOr<DTensor> LayerNorm::Forward(const DTensor& x) {
  return ops::LayerNorm(x, weight(), bias(), eps());
}

std::string LayerNorm::ExtraRepr() const {
  return absl::StrCat(Norm::ExtraRepr(), ", elementwise_affine=",
                      weight().defined() ? "true" : "false",
                      ", bias=", bias().defined() ? "true" : "false");
}

}  // namespace nn
}  // namespace dtensor
