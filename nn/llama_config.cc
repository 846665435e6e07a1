#include "dtensor/nn/llama_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/layer_checks.h"

namespace dtensor {
namespace nn {
namespace {

constexpr absl::string_view kName = "LlamaConfig";

// 1 <= value <= max.
absl::Status CheckSize(absl::string_view name, int64_t value, int64_t max) {
  DT_RETURN_IF_ERROR(CheckPositive(kName, name, value));
  if (value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(kName, ": ", name, " ", value, " is above the limit ", max));
}

absl::Status CheckPositiveReal(absl::string_view name, double value) {
  if (value > 0 && std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      kName, ": ", name, " ", value, " must be positive and finite"));
}

}  // namespace

absl::Status LlamaConfig::Validate() const {
  DT_RETURN_IF_ERROR(CheckSize("dim", dim, kMaxLlamaDim));
  DT_RETURN_IF_ERROR(CheckSize("n_layers", n_layers, kMaxLlamaLayers));
  DT_RETURN_IF_ERROR(CheckSize("n_heads", n_heads, kMaxLlamaHeads));
  DT_RETURN_IF_ERROR(CheckSize("n_kv_heads", kv_heads(), kMaxLlamaHeads));
  DT_RETURN_IF_ERROR(CheckSize("vocab_size", vocab_size, kMaxLlamaVocab));
  DT_RETURN_IF_ERROR(CheckSize("multiple_of", multiple_of, kMaxLlamaHiddenDim));
  DT_RETURN_IF_ERROR(CheckSize("max_seq_len", max_seq_len, kMaxLlamaSeqLen));
  if (dim % n_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": dim ", dim, " is not divisible by n_heads ", n_heads));
  }
  if (n_heads % kv_heads() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": n_heads ", n_heads,
                     " is not divisible by n_kv_heads ", kv_heads()));
  }
  if (head_dim() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": head dim ", head_dim(), " (dim / n_heads) must be even"));
  }
  DT_RETURN_IF_ERROR(CheckPositiveReal("norm_eps", norm_eps));
  DT_RETURN_IF_ERROR(CheckPositiveReal("rope_theta", rope_theta));
  if (ffn_dim_multiplier.has_value()) {
    DT_RETURN_IF_ERROR(
        CheckPositiveReal("ffn_dim_multiplier", *ffn_dim_multiplier));
    // Checked before hidden_dim() converts the product to an integer.
    const double hidden = *ffn_dim_multiplier * (2 * (4 * dim) / 3);
    if (hidden > kMaxLlamaHiddenDim) {
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": ffn_dim_multiplier ", *ffn_dim_multiplier,
                       " makes the hidden dim ", hidden, ", above the limit ",
                       kMaxLlamaHiddenDim));
    }
  }
  DT_RETURN_IF_ERROR(CheckSize("hidden dim", hidden_dim(), kMaxLlamaHiddenDim));
  if (!(init_std >= 0 && std::isfinite(init_std))) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": init_std ", init_std, " must be non-negative and finite"));
  }
  return absl::OkStatus();
}

int64_t LlamaConfig::hidden_dim() const {
  int64_t hidden = 2 * (4 * dim) / 3;
  if (ffn_dim_multiplier.has_value()) {
    hidden =
        static_cast<int64_t>(*ffn_dim_multiplier * static_cast<double>(hidden));
  }
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

LlamaConfig LlamaConfig::Llama3_8B() {
  LlamaConfig config;
  config.dim = 4096;
  config.n_layers = 32;
  config.n_heads = 32;
  config.n_kv_heads = 8;
  config.vocab_size = 128256;
  config.multiple_of = 1024;
  config.ffn_dim_multiplier = 1.3;
  config.norm_eps = 1e-5;
  config.rope_theta = 500000.0;
  config.max_seq_len = 8192;
  return config;
}

LlamaConfig LlamaConfig::Llama3_70B() {
  LlamaConfig config = Llama3_8B();
  config.dim = 8192;
  config.n_layers = 80;
  config.n_heads = 64;
  config.multiple_of = 4096;
  return config;
}

std::string LlamaConfig::ToString() const {
  return absl::StrCat("dim=", dim, " n_layers=", n_layers, " n_heads=", n_heads,
                      " n_kv_heads=", kv_heads(), " vocab_size=", vocab_size,
                      " multiple_of=", multiple_of, " ffn_dim_multiplier=",
                      ffn_dim_multiplier.has_value()
                          ? absl::StrCat(*ffn_dim_multiplier)
                          : "none",
                      " hidden_dim=", hidden_dim(), " norm_eps=", norm_eps,
                      " rope_theta=", rope_theta, " max_seq_len=", max_seq_len,
                      " init_std=", init_std);
}

}  // namespace nn
}  // namespace dtensor
