#include "dtensor/nn/dropout.h"

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/random_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<Dropout>> Dropout::Create(double p,
                                                         uint64_t seed) {
  if (!(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: p ", p, " is outside [0, 1]"));
  }
  return std::unique_ptr<Dropout>(new Dropout(p, seed));
}

absl::StatusOr<DTensor> Dropout::Forward(const DTensor& x) {
  if (!training() || p_ == 0) return x;
  DT_ASSIGN_OR_RETURN(DTensor y, ops::Dropout(x, p_, seed_, offset_));
  offset_ += static_cast<uint64_t>(NumElements(x.shape()));
  return y;
}

std::string Dropout::ExtraRepr() const { return absl::StrCat("p=", p_); }

}  // namespace nn
}  // namespace dtensor
