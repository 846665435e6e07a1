#include "tests/tensor/fused_norm_reference.h"

#include <cmath>

namespace dtensor::testing {

std::vector<double> Values(const Tensor& t) {
  return t.defined() ? *t.To(DType::kF64)->Contiguous().ToVector<double>()
                     : std::vector<double>();
}

Reference ReferenceForward(const std::vector<double>& residual,
                           const std::vector<double>& delta,
                           const std::vector<double>& weight, int64_t width,
                           double eps) {
  Reference ref;
  ref.sum.resize(residual.size());
  ref.normed.resize(residual.size());
  for (size_t i = 0; i < residual.size(); ++i) {
    ref.sum[i] = residual[i] + delta[i];
  }
  for (size_t base = 0; base < residual.size(); base += width) {
    double squares = 0;
    for (int64_t j = 0; j < width; ++j) {
      squares += ref.sum[base + j] * ref.sum[base + j];
    }
    const double scale = 1 / std::sqrt(squares / width + eps);
    for (int64_t j = 0; j < width; ++j) {
      ref.normed[base + j] =
          ref.sum[base + j] * scale * (weight.empty() ? 1.0 : weight[j]);
    }
  }
  return ref;
}

ReferenceGrads ReferenceBackward(const std::vector<double>& x,
                                 const std::vector<double>& weight,
                                 const std::vector<double>& g,
                                 const std::vector<double>& grad_sum,
                                 int64_t width, double eps) {
  ReferenceGrads ref;
  ref.dx.resize(x.size());
  ref.dweight.assign(weight.empty() ? 0 : width, 0.0);
  for (size_t base = 0; base < x.size(); base += width) {
    double squares = 0;
    for (int64_t j = 0; j < width; ++j) squares += x[base + j] * x[base + j];
    const double r = 1 / std::sqrt(squares / width + eps);
    double dot = 0;
    for (int64_t j = 0; j < width; ++j) {
      const double w = weight.empty() ? 1.0 : weight[j];
      dot += g[base + j] * w * x[base + j] * r;
    }
    for (int64_t j = 0; j < width; ++j) {
      const double w = weight.empty() ? 1.0 : weight[j];
      const double xhat = x[base + j] * r;
      ref.dx[base + j] = r * (g[base + j] * w - xhat * dot / width) +
                         (grad_sum.empty() ? 0.0 : grad_sum[base + j]);
      if (!weight.empty()) ref.dweight[j] += g[base + j] * xhat;
    }
  }
  return ref;
}

Tolerance Scaled(DType dtype, double scale) {
  Tolerance t = ToleranceFor(dtype);
  t.atol *= scale;
  t.rtol *= scale;
  return t;
}

}  // namespace dtensor::testing
