#include "tests/nn/reference_llama.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace dtensor {
namespace nn_testing {
namespace {

const Array& Get(const Weights& weights, const std::string& name) {
  return weights.at(name);
}

double Silu(double x) { return x / (1.0 + std::exp(-x)); }

// Rotates x [batch, seq, heads, head_dim] in place: pairs (i, i + half) of
// the row at position s by s * theta^(-2i / head_dim).
void RefRope(std::vector<double>& x, int64_t batch, int64_t seq, int64_t heads,
             int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        double* row = &x[((b * seq + s) * heads + h) * head_dim];
        for (int64_t i = 0; i < half; ++i) {
          const double angle =
              s * std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
          const double x1 = row[i];
          const double x2 = row[i + half];
          row[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          row[i + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
    }
  }
}

}  // namespace

Array ToArray(const Tensor& tensor) {
  return {tensor.shape(), tensor.ToVector<double>().value()};
}

std::vector<double> RefLinear(const std::vector<double>& x, int64_t rows,
                              const Array& w, const Array* bias) {
  const int64_t out = w.shape[0];
  const int64_t in = w.shape[1];
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias == nullptr ? 0.0 : bias->values[o];
      for (int64_t i = 0; i < in; ++i) {
        sum += x[r * in + i] * w.values[o * in + i];
      }
      y[r * out + o] = sum;
    }
  }
  return y;
}

std::vector<double> RefRmsNorm(const std::vector<double>& x, const Array& w,
                               double eps) {
  const int64_t dim = w.shape[0];
  std::vector<double> y(x.size());
  for (size_t start = 0; start < x.size(); start += dim) {
    double mean_square = 0;
    for (int64_t i = 0; i < dim; ++i)
      mean_square += x[start + i] * x[start + i];
    mean_square /= dim;
    const double inverse = 1.0 / std::sqrt(mean_square + eps);
    for (int64_t i = 0; i < dim; ++i) {
      y[start + i] = x[start + i] * inverse * w.values[i];
    }
  }
  return y;
}

std::vector<double> RefLayerNorm(const std::vector<double>& x, int64_t dim,
                                 const Array* w, const Array* b, double eps) {
  std::vector<double> y(x.size());
  for (size_t start = 0; start < x.size(); start += dim) {
    double mean = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[start + i];
    mean /= dim;
    double var = 0;
    for (int64_t i = 0; i < dim; ++i) {
      var += (x[start + i] - mean) * (x[start + i] - mean);
    }
    var /= dim;
    for (int64_t i = 0; i < dim; ++i) {
      double v = (x[start + i] - mean) / std::sqrt(var + eps);
      if (w != nullptr) v *= w->values[i];
      if (b != nullptr) v += b->values[i];
      y[start + i] = v;
    }
  }
  return y;
}

std::vector<double> RefFeedForward(const std::vector<double>& x, int64_t rows,
                                   const Weights& weights,
                                   const std::string& prefix) {
  std::vector<double> gate =
      RefLinear(x, rows, Get(weights, prefix + "w1.weight"));
  const std::vector<double> up =
      RefLinear(x, rows, Get(weights, prefix + "w3.weight"));
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = Silu(gate[i]) * up[i];
  return RefLinear(gate, rows, Get(weights, prefix + "w2.weight"));
}

std::vector<double> RefAttention(const std::vector<double>& x, int64_t batch,
                                 int64_t seq, const Weights& weights,
                                 const std::string& prefix, int64_t n_heads,
                                 int64_t n_kv_heads, double theta) {
  const int64_t rows = batch * seq;
  const Array& wq = Get(weights, prefix + "wq.weight");
  const int64_t head_dim = wq.shape[0] / n_heads;
  std::vector<double> q = RefLinear(x, rows, wq);
  std::vector<double> k =
      RefLinear(x, rows, Get(weights, prefix + "wk.weight"));
  const std::vector<double> v =
      RefLinear(x, rows, Get(weights, prefix + "wv.weight"));
  RefRope(q, batch, seq, n_heads, head_dim, theta);
  RefRope(k, batch, seq, n_kv_heads, head_dim, theta);
  const int64_t group = n_heads / n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  // Heads concatenated in head order: [batch, seq, n_heads * head_dim].
  std::vector<double> heads(rows * n_heads * head_dim, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t kv = h / group;
      for (int64_t i = 0; i < seq; ++i) {
        const double* qi = &q[((b * seq + i) * n_heads + h) * head_dim];
        std::vector<double> scores(i + 1);
        double max_score = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const double* kj = &k[((b * seq + j) * n_kv_heads + kv) * head_dim];
          double dot = 0;
          for (int64_t e = 0; e < head_dim; ++e) dot += qi[e] * kj[e];
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double total = 0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        double* out = &heads[((b * seq + i) * n_heads + h) * head_dim];
        for (int64_t j = 0; j <= i; ++j) {
          const double* vj = &v[((b * seq + j) * n_kv_heads + kv) * head_dim];
          for (int64_t e = 0; e < head_dim; ++e) {
            out[e] += scores[j] / total * vj[e];
          }
        }
      }
    }
  }
  return RefLinear(heads, rows, Get(weights, prefix + "wo.weight"));
}

std::vector<double> RefLlama(const std::vector<int64_t>& tokens, int64_t batch,
                             int64_t seq, const Weights& weights,
                             const nn::LlamaConfig& config) {
  const int64_t rows = batch * seq;
  const int64_t dim = config.dim;
  const Array& table = Get(weights, "tok_embeddings.weight");
  std::vector<double> h(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(&table.values[tokens[r] * dim], dim, &h[r * dim]);
  }
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    const std::string prefix = absl::StrCat("layers.", layer, ".");
    const std::vector<double> attended = RefAttention(
        RefRmsNorm(h, Get(weights, prefix + "attention_norm.weight"),
                   config.norm_eps),
        batch, seq, weights, prefix + "attention.", config.n_heads,
        config.kv_heads(), config.rope_theta);
    for (size_t i = 0; i < h.size(); ++i) h[i] += attended[i];
    const std::vector<double> fed =
        RefFeedForward(RefRmsNorm(h, Get(weights, prefix + "ffn_norm.weight"),
                                  config.norm_eps),
                       rows, weights, prefix + "feed_forward.");
    for (size_t i = 0; i < h.size(); ++i) h[i] += fed[i];
  }
  h = RefRmsNorm(h, Get(weights, "norm.weight"), config.norm_eps);
  return RefLinear(h, rows, Get(weights, "output.weight"));
}

}  // namespace nn_testing
}  // namespace dtensor
