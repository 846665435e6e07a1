#include "tools/explain_config.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/json_value.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/base/text_file.h"
#include "dtensor/nn/configs/shipped_configs.h"
#include "tools/user_path.h"

namespace dtensor {
namespace {

// The largest integer a double holds exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;

absl::StatusOr<double> NumberOf(const JsonValue::Member& member) {
  if (!member.second.is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: \"", member.first, "\" must be a number, got ",
        JsonKindName(member.second.kind())));
  }
  return member.second.number_value();
}

absl::StatusOr<int64_t> IntegerOf(const JsonValue::Member& member) {
  DT_ASSIGN_OR_RETURN(double value, NumberOf(member));
  if (value != std::floor(value) || std::fabs(value) > kMaxExactInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: \"", member.first,
                     "\" must be an integer, got ", value));
  }
  return static_cast<int64_t>(value);
}

// Sets the field `member` names.
absl::Status SetField(const JsonValue::Member& member,
                      nn::LlamaConfig& config) {
  const std::string& key = member.first;
  int64_t* integer = key == "dim"           ? &config.dim
                     : key == "n_layers"    ? &config.n_layers
                     : key == "n_heads"     ? &config.n_heads
                     : key == "vocab_size"  ? &config.vocab_size
                     : key == "multiple_of" ? &config.multiple_of
                     : key == "max_seq_len" ? &config.max_seq_len
                                            : nullptr;
  if (integer != nullptr) {
    DT_ASSIGN_OR_RETURN(*integer, IntegerOf(member));
    return absl::OkStatus();
  }
  if (key == "n_kv_heads") {
    DT_ASSIGN_OR_RETURN(config.n_kv_heads, IntegerOf(member));
    return absl::OkStatus();
  }
  if (key == "ffn_dim_multiplier") {
    DT_ASSIGN_OR_RETURN(config.ffn_dim_multiplier, NumberOf(member));
    return absl::OkStatus();
  }
  double* real = key == "norm_eps"     ? &config.norm_eps
                 : key == "rope_theta" ? &config.rope_theta
                 : key == "init_std"   ? &config.init_std
                                       : nullptr;
  if (real == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: unknown key \"", key, "\""));
  }
  DT_ASSIGN_OR_RETURN(*real, NumberOf(member));
  return absl::OkStatus();
}

std::vector<std::string> ShippedNames() {
  std::vector<std::string> names;
  for (const nn::ShippedConfig& shipped : nn::ShippedLlamaConfigs()) {
    names.emplace_back(shipped.name);
  }
  return names;
}

}  // namespace

absl::StatusOr<nn::LlamaConfig> ParseLlamaConfigJson(absl::string_view json) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", root.status().message()));
  }
  if (!root->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: expected an object, got ", JsonKindName(root->kind())));
  }
  nn::LlamaConfig config;
  for (const JsonValue::Member& member : root->members()) {
    DT_RETURN_IF_ERROR(SetField(member, config));
  }
  DT_RETURN_IF_ERROR(config.Validate());
  return config;
}

absl::StatusOr<nn::LlamaConfig> LoadLlamaConfig(
    const std::string& name_or_path) {
  for (const nn::ShippedConfig& shipped : nn::ShippedLlamaConfigs()) {
    if (shipped.name == name_or_path) return ParseLlamaConfigJson(shipped.json);
  }
  absl::StatusOr<std::string> text =
      ReadTextFile(UserPath(name_or_path), kMaxModelConfigBytes);
  if (absl::IsInvalidArgument(text.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", text.status().message()));
  }
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "model config \"", name_or_path, "\" is neither a shipped config (",
        absl::StrJoin(ShippedNames(), ", "), ") nor a readable file"));
  }
  absl::StatusOr<nn::LlamaConfig> config = ParseLlamaConfigJson(*text);
  if (!config.ok()) {
    return absl::Status(
        config.status().code(),
        absl::StrCat(name_or_path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace dtensor
