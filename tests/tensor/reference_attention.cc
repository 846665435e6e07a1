#include "tests/tensor/reference_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtensor/tensor/elementwise.h"

namespace dtensor::testing {
namespace {

// The row-major index of the matrix of an operand of `shape` that the
// output batch entry `entry` (row-major over `batch`) uses, its batch dims
// right-aligned against `batch` and broadcast where they are 1.
int64_t MatrixOf(const Shape& shape, const Shape& batch, int64_t entry) {
  const int64_t own = static_cast<int64_t>(shape.size()) - 2;
  const int64_t offset = static_cast<int64_t>(batch.size()) - own;
  std::vector<int64_t> index(batch.size());
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    index[d] = entry % batch[d];
    entry /= batch[d];
  }
  int64_t matrix = 0;
  for (int64_t d = 0; d < own; ++d) {
    matrix = matrix * shape[d] + (shape[d] == 1 ? 0 : index[offset + d]);
  }
  return matrix;
}

double Dot(const double* a, const double* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// The weights of query row `qi` [e] over keys [lk, e]: softmax of the scaled
// scores of its `visible` first keys, 0 elsewhere (all 0 when none); `lse`
// gets the log-sum-exp of those scores (-inf when none).
std::vector<double> Weights(const double* qi, const double* keys, int64_t lk,
                            int64_t e, int64_t visible, double scale,
                            double& lse) {
  std::vector<double> p(lk, 0.0);
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < visible; ++j) {
    p[j] = Dot(qi, keys + j * e, e) * scale;
    max = std::max(max, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < visible; ++j) sum += std::exp(p[j] - max);
  for (int64_t j = 0; j < visible; ++j) p[j] = std::exp(p[j] - max) / sum;
  lse = visible == 0 ? -std::numeric_limits<double>::infinity()
                     : max + std::log(sum);
  return p;
}

}  // namespace

AttentionReference ReferenceAttention(const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& grad_out,
                                      bool causal, double scale) {
  const int64_t lq = q.size(-2), lk = k.size(-2);
  const int64_t e = q.size(-1), ev = v.size(-1);
  if (scale <= 0) scale = e > 0 ? 1.0 / std::sqrt(static_cast<double>(e)) : 1;
  const auto batch_of = [](const Tensor& t) {
    return Shape(t.shape().begin(), t.shape().end() - 2);
  };
  const Shape batch =
      *BroadcastShapes(*BroadcastShapes(batch_of(q), batch_of(k)), batch_of(v));
  AttentionReference r;
  r.out_shape = batch;
  r.out_shape.insert(r.out_shape.end(), {lq, ev});
  r.out.assign(NumElements(r.out_shape), 0.0);
  r.lse.assign(NumElements(batch) * lq, 0.0);
  const bool grads = grad_out.defined();
  const std::vector<double> qv = q.ToVector<double>().value(),
                            kv = k.ToVector<double>().value();
  const std::vector<double> vv = v.ToVector<double>().value();
  const std::vector<double> gv =
      grads ? grad_out.ToVector<double>().value() : std::vector<double>();
  if (grads) {
    r.dq.assign(qv.size(), 0.0);
    r.dk.assign(kv.size(), 0.0);
    r.dv.assign(vv.size(), 0.0);
  }
  // Rows by data() + offset, not &x[i]: with E or Ev 0 the vectors are empty.
  for (int64_t entry = 0; entry < NumElements(batch); ++entry) {
    const int64_t qm = MatrixOf(q.shape(), batch, entry) * lq * e;
    const int64_t km = MatrixOf(k.shape(), batch, entry) * lk * e;
    const int64_t vm = MatrixOf(v.shape(), batch, entry) * lk * ev;
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t visible =
          causal ? std::clamp<int64_t>(i + lk - lq + 1, 0, lk) : lk;
      const std::vector<double> p =
          Weights(qv.data() + qm + i * e, kv.data() + km, lk, e, visible, scale,
                  r.lse[entry * lq + i]);
      const int64_t row = (entry * lq + i) * ev;
      for (int64_t j = 0; j < visible; ++j) {
        for (int64_t c = 0; c < ev; ++c) {
          r.out[row + c] += p[j] * vv[vm + j * ev + c];
        }
      }
      if (!grads) continue;
      // dp_j = g . v_j; ds_j = p_j (dp_j - sum(dp p)) scale.
      std::vector<double> dp(visible);
      double total = 0;
      for (int64_t j = 0; j < visible; ++j) {
        dp[j] = Dot(gv.data() + row, vv.data() + vm + j * ev, ev);
        total += dp[j] * p[j];
      }
      for (int64_t j = 0; j < visible; ++j) {
        const double ds = p[j] * (dp[j] - total) * scale;
        for (int64_t c = 0; c < e; ++c) {
          r.dq[qm + i * e + c] += ds * kv[km + j * e + c];
          r.dk[km + j * e + c] += ds * qv[qm + i * e + c];
        }
        for (int64_t c = 0; c < ev; ++c) {
          r.dv[vm + j * ev + c] += p[j] * gv[row + c];
        }
      }
    }
  }
  return r;
}

}  // namespace dtensor::testing
