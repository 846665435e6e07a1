#include "tests/tensor/reference_adamw.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dtensor::testing {

AdamWState AdamWStateOf(const Tensor& p, const Tensor& m, const Tensor& v) {
  return {p.ToVector<double>().value(), m.ToVector<double>().value(),
          v.ToVector<double>().value()};
}

void ReferenceAdamWStep(AdamWState& s, AdamWState& scale,
                        const std::vector<double>& g, const AdamWOptions& a,
                        int64_t step) {
  const double t = static_cast<double>(step);
  scale = s;
  for (size_t i = 0; i < g.size(); ++i) {
    const double decayed = s.p[i] * (1 - a.learning_rate * a.weight_decay);
    const double m_kept = a.beta1 * s.m[i], m_added = (1 - a.beta1) * g[i];
    s.m[i] = m_kept + m_added;
    s.v[i] = a.beta2 * s.v[i] + (1 - a.beta2) * g[i] * g[i];
    const double m_hat = s.m[i] / (1 - std::pow(a.beta1, t));
    const double denom =
        std::sqrt(s.v[i]) / std::sqrt(1 - std::pow(a.beta2, t)) + a.eps;
    const double update = a.learning_rate * m_hat / denom;
    s.p[i] = decayed - update;
    scale.m[i] = std::abs(m_kept) + std::abs(m_added);
    scale.v[i] = s.v[i];
    scale.p[i] = std::abs(decayed) + std::abs(update);
  }
}

void ExpectNearScaled(const Tensor& got, const std::vector<double>& want,
                      const std::vector<double>& scale, double rtol,
                      double atol, const char* what) {
  const std::vector<double> values = got.ToVector<double>().value();
  ASSERT_EQ(values.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(values[i] - want[i]), rtol * scale[i] + atol)
        << what << "[" << i << "]: " << values[i] << " vs " << want[i];
  }
}

}  // namespace dtensor::testing
