#ifndef DTENSOR_NN_LLAMA_CONFIG_H_
#define DTENSOR_NN_LLAMA_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace dtensor {
namespace nn {

// The largest values LlamaConfig::Validate accepts, so that a typo (an extra
// digit, a size meant for another field) is an error instead of hours of work
// or an integer overflow; far above real models (Llama 3 405B: 126 layers,
// dim 16384, 128 heads, vocabulary 128256). Products of these limits (numbers
// of elements, bytes) fit in int64_t. Stated in docs/reliability.md.
inline constexpr int64_t kMaxLlamaLayers = 10000;
inline constexpr int64_t kMaxLlamaDim = int64_t{1} << 20;
inline constexpr int64_t kMaxLlamaHeads = int64_t{1} << 16;
inline constexpr int64_t kMaxLlamaVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxLlamaSeqLen = int64_t{1} << 24;
// multiple_of and the feed-forward hidden dim.
inline constexpr int64_t kMaxLlamaHiddenDim = int64_t{1} << 22;

// The shape of a Llama-style Transformer (the fields of Meta's ModelArgs).
struct LlamaConfig {
  int64_t dim = 4096;
  int64_t n_layers = 32;
  int64_t n_heads = 32;
  // Key/value heads for grouped-query attention; unset: n_heads.
  std::optional<int64_t> n_kv_heads;
  int64_t vocab_size = 32000;
  // The feed-forward hidden dim is rounded up to a multiple of this.
  int64_t multiple_of = 256;
  // Scales the feed-forward hidden dim before rounding.
  std::optional<double> ffn_dim_multiplier;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // The longest sequence Forward accepts.
  int64_t max_seq_len = 2048;
  // The standard deviation of the normal initialization of every Linear and
  // Embedding weight (norm weights start at ones).
  double init_std = 0.02;

  // Errors: (each naming the bad field) a size < 1 or above its limit
  // (kMaxLlama*, naming it), dim not divisible by n_heads,
  // n_heads not divisible by n_kv_heads, an odd head dim (rotary pairs),
  // norm_eps, rope_theta or ffn_dim_multiplier not positive and finite,
  // init_std negative or not finite.
  absl::Status Validate() const;

  int64_t kv_heads() const { return n_kv_heads.value_or(n_heads); }
  int64_t head_dim() const { return dim / n_heads; }
  // The reference rule: 4 * dim, times 2/3 (truncated), times
  // ffn_dim_multiplier if set (truncated), rounded up to multiple_of.
  int64_t hidden_dim() const;

  // Llama 3 8B and 70B (vocabulary 128256, rope theta 500000).
  static LlamaConfig Llama3_8B();
  static LlamaConfig Llama3_70B();

  // "dim=32 n_layers=2 n_heads=4 n_kv_heads=2 vocab_size=64 ...".
  std::string ToString() const;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_LLAMA_CONFIG_H_
