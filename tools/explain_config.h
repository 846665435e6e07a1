#ifndef DTENSOR_TOOLS_EXPLAIN_CONFIG_H_
#define DTENSOR_TOOLS_EXPLAIN_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/nn/llama_config.h"

namespace dtensor {

// Model configs for `dtensor explain`.

// Parses a JSON object whose keys are fields of nn::LlamaConfig ("dim",
// "n_layers", "n_heads", "n_kv_heads", "vocab_size", "multiple_of",
// "ffn_dim_multiplier", "norm_eps", "rope_theta", "max_seq_len",
// "init_std"); absent fields keep LlamaConfig's defaults. Errors
// (InvalidArgument) name the value: malformed JSON, not an object, an
// unknown key, a non-number, a non-integer for an integer field, and
// LlamaConfig::Validate's.
absl::StatusOr<nn::LlamaConfig> ParseLlamaConfigJson(absl::string_view json);

// A shipped config (nn/configs/: "tiny", "1b", "8b", "70b", "405b") by
// name, else the JSON file at `name_or_path`. Errors: NotFound naming the value
// and the shipped names when it is neither; a file's parse errors prefixed with
// its path.
absl::StatusOr<nn::LlamaConfig> LoadLlamaConfig(
    const std::string& name_or_path);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_EXPLAIN_CONFIG_H_
