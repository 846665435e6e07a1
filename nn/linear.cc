#include "dtensor/nn/linear.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/layer_checks.h"
#include "dtensor/ops/matmul_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(
    int64_t in_features, int64_t out_features, const LinearOptions& options) {
  DT_RETURN_IF_ERROR(CheckPositive("Linear", "in_features", in_features));
  DT_RETURN_IF_ERROR(CheckPositive("Linear", "out_features", out_features));
  std::unique_ptr<Linear> linear(new Linear(in_features, out_features));
  DT_ASSIGN_OR_RETURN(
      linear->weight_,
      linear->AddParameter("weight", {out_features, in_features},
                           options.weight_init));
  if (options.bias) {
    DT_ASSIGN_OR_RETURN(
        linear->bias_,
        linear->AddParameter("bias", {out_features}, options.bias_init));
  }
  return linear;
}

absl::StatusOr<DTensor> Linear::Forward(const DTensor& x) {
  return ops::Linear(x, weight(), bias());
}

std::string Linear::ExtraRepr() const {
  return absl::StrCat("in_features=", in_features_,
                      ", out_features=", out_features_,
                      ", bias=", has_bias() ? "true" : "false");
}

}  // namespace nn
}  // namespace dtensor
