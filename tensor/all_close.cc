// AllClose.
#include <cmath>

#include "dtensor/tensor/tensor.h"

namespace dtensor {

bool AllClose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return false;
  const absl::StatusOr<std::vector<double>> a_read = a.ToVector<double>();
  const absl::StatusOr<std::vector<double>> b_read = b.ToVector<double>();
  if (!a_read.ok() || !b_read.ok()) return false;
  const std::vector<double>& a_values = *a_read;
  const std::vector<double>& b_values = *b_read;
  for (size_t i = 0; i < a_values.size(); ++i) {
    const double x = a_values[i];
    const double y = b_values[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (x == y) continue;  // Covers equal infinities.
    if (std::isinf(x) || std::isinf(y)) return false;
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) return false;
  }
  return true;
}

}  // namespace dtensor
