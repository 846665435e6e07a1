#ifndef DTENSOR_NN_CONFIGS_SHIPPED_CONFIGS_H_
#define DTENSOR_NN_CONFIGS_SHIPPED_CONFIGS_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dtensor {
namespace nn {

// A model config shipped in nn/configs/: its name (the file name
// without
// ".json": "tiny", "1b", "8b", "70b", "405b") and the file's JSON text.
struct ShippedConfig {
  absl::string_view name;
  absl::string_view json;
};

// Every shipped config, in name order. Parse them with
// tools/explain_config.h (ParseLlamaConfigJson).
absl::Span<const ShippedConfig> ShippedLlamaConfigs();

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_CONFIGS_SHIPPED_CONFIGS_H_
