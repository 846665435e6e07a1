#include "dtensor/nn/feed_forward.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/layer_checks.h"
#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<FeedForward>> FeedForward::Create(
    int64_t dim, int64_t hidden_dim, Initializer weight_init) {
  DT_RETURN_IF_ERROR(CheckPositive("FeedForward", "dim", dim));
  DT_RETURN_IF_ERROR(CheckPositive("FeedForward", "hidden_dim", hidden_dim));
  std::unique_ptr<FeedForward> ffn(new FeedForward(dim, hidden_dim));
  LinearOptions options;
  options.bias = false;
  options.weight_init = weight_init;
  DT_ASSIGN_OR_RETURN(auto w1, Linear::Create(dim, hidden_dim, options));
  DT_ASSIGN_OR_RETURN(auto w2, Linear::Create(hidden_dim, dim, options));
  DT_ASSIGN_OR_RETURN(auto w3, Linear::Create(dim, hidden_dim, options));
  DT_ASSIGN_OR_RETURN(ffn->w1_, ffn->AddModule("w1", std::move(w1)));
  DT_ASSIGN_OR_RETURN(ffn->w2_, ffn->AddModule("w2", std::move(w2)));
  DT_ASSIGN_OR_RETURN(ffn->w3_, ffn->AddModule("w3", std::move(w3)));
  return ffn;
}

absl::StatusOr<DTensor> FeedForward::Forward(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(DTensor gate, (*w1_)(x));
  DT_ASSIGN_OR_RETURN(DTensor up, (*w3_)(x));
  // silu(gate) * up in one kernel forward and one backward.
  DT_ASSIGN_OR_RETURN(DTensor hidden, ops::SwiGlu(gate, up));
  return (*w2_)(hidden);
}

std::string FeedForward::ExtraRepr() const {
  return absl::StrCat("dim=", dim_, ", hidden_dim=", hidden_dim_);
}

}  // namespace nn
}  // namespace dtensor
