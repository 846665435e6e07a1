#ifndef DTENSOR_TESTS_NN_REFERENCE_LLAMA_H_
#define DTENSOR_TESTS_NN_REFERENCE_LLAMA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dtensor/nn/llama_config.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn_testing {

// Plain loops in double, written from the Llama reference, independent of
// dtensor/nn/ and dtensor/ops/: the references the nn tests check the modules
// against.

// A row-major array of doubles.
struct Array {
  Shape shape;
  std::vector<double> values;
};
Array ToArray(const Tensor& tensor);

// Parameters by fully-qualified name.
using Weights = std::map<std::string, Array>;

// x [rows, in] @ w[out, in]^T (+ bias [out]).
std::vector<double> RefLinear(const std::vector<double>& x, int64_t rows,
                              const Array& w, const Array* bias = nullptr);
// Over rows of w.shape[0] elements.
std::vector<double> RefRmsNorm(const std::vector<double>& x, const Array& w,
                               double eps);
// weight / bias may be null (no affine).
std::vector<double> RefLayerNorm(const std::vector<double>& x, int64_t dim,
                                 const Array* w, const Array* b, double eps);
// w2(silu(w1 x) * w3 x) with the weights `prefix`w1.weight, ...
std::vector<double> RefFeedForward(const std::vector<double>& x, int64_t rows,
                                   const Weights& weights,
                                   const std::string& prefix);
// Causal GQA attention with rotate-half rotary embeddings on x [batch, seq,
// dim], weights `prefix`wq.weight, ...: query head h uses key/value head
// h / (n_heads / n_kv_heads).
std::vector<double> RefAttention(const std::vector<double>& x, int64_t batch,
                                 int64_t seq, const Weights& weights,
                                 const std::string& prefix, int64_t n_heads,
                                 int64_t n_kv_heads, double theta);
// Logits [batch, seq, vocab] of the Llama forward on tokens [batch, seq].
std::vector<double> RefLlama(const std::vector<int64_t>& tokens, int64_t batch,
                             int64_t seq, const Weights& weights,
                             const nn::LlamaConfig& config);

}  // namespace nn_testing
}  // namespace dtensor

#endif  // DTENSOR_TESTS_NN_REFERENCE_LLAMA_H_
