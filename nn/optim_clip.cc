#include "dtensor/nn/optim_clip.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<double> GlobalGradNorm(absl::Span<const DTensor> grads) {
  NoGrad not_recorded;
  // One running sum per mesh: 0-d sums on one mesh add without
  // communication while Partial.
  std::vector<DTensor> per_mesh;
  for (size_t i = 0; i < grads.size(); ++i) {
    const DTensor& grad = grads[i];
    if (!grad.defined()) continue;
    if (!IsFloatingPoint(grad.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GlobalGradNorm: gradient ", i, " has dtype ",
          std::string(DTypeName(grad.dtype())), "; a floating one is needed"));
    }
    DT_ASSIGN_OR_RETURN(DTensor squares, ops::SumOfSquares(grad));
    auto same_mesh = std::find_if(
        per_mesh.begin(), per_mesh.end(),
        [&](const DTensor& sum) { return sum.mesh() == grad.mesh(); });
    if (same_mesh == per_mesh.end()) {
      per_mesh.push_back(std::move(squares));
    } else {
      DT_ASSIGN_OR_RETURN(*same_mesh, ops::Add(*same_mesh, squares));
    }
  }
  double total = 0;
  for (const DTensor& sum : per_mesh) {
    DT_ASSIGN_OR_RETURN(Tensor full, sum.FullTensor());
    if (full.defined()) {
      DT_ASSIGN_OR_RETURN(double value, full.Item());
      total += value;
    }
  }
  return std::sqrt(total);
}

absl::StatusOr<double> ClipGradNorm(std::vector<DTensor>* grads,
                                    double max_norm) {
  if (!(max_norm >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClipGradNorm: max_norm ", max_norm, " must be >= 0"));
  }
  DT_ASSIGN_OR_RETURN(const double norm, GlobalGradNorm(*grads));
  const double scale = max_norm / (norm + 1e-6);
  if (scale >= 1) return norm;
  NoGrad not_recorded;
  for (DTensor& grad : *grads) {
    if (!grad.defined()) continue;
    DT_ASSIGN_OR_RETURN(grad, ops::Mul(grad, scale));
  }
  return norm;
}

}  // namespace nn
}  // namespace dtensor
