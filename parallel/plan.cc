#include "dtensor/parallel/plan.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/enum_names.h"
#include "dtensor/base/json_value.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/base/text_file.h"
#include "dtensor/parallel/style_registry.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr EnumNames<DataParallel, DataParallel::kFsdp> kDataParallelNames(
    "none", "replicate", "fsdp");

absl::Status WrongType(absl::string_view where, absl::string_view expected,
                       const JsonValue& value) {
  return absl::InvalidArgumentError(absl::StrCat("plan: ", where, " must be a ",
                                                 expected, ", not a ",
                                                 JsonKindName(value.kind())));
}

absl::StatusOr<std::string> StringOption(absl::string_view pattern,
                                         const JsonValue::Member& member) {
  if (!member.second.is_string()) {
    return WrongType(absl::StrCat("\"", pattern, "\".", member.first), "string",
                     member.second);
  }
  return member.second.string_value();
}

// The options of an object entry (every key but "style").
absl::Status ParseOptions(absl::string_view pattern, const JsonValue& value,
                          StyleSpec& spec) {
  for (const JsonValue::Member& member : value.members()) {
    if (member.first == "style") continue;
    if (member.first == "input_layouts") {
      DT_ASSIGN_OR_RETURN(spec.input_layouts, StringOption(pattern, member));
    } else if (member.first == "output_layouts") {
      DT_ASSIGN_OR_RETURN(spec.output_layouts, StringOption(pattern, member));
    } else if (member.first == "use_local_output") {
      if (!member.second.is_bool()) {
        return WrongType(absl::StrCat("\"", pattern, "\".use_local_output"),
                         "boolean", member.second);
      }
      spec.use_local_output = member.second.bool_value();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan: unknown option \"", member.first, "\" for \"", pattern, "\""));
    }
  }
  return absl::OkStatus();
}

// A style entry: "colwise" or {"style": "colwise", options...}.
absl::StatusOr<StyleSpec> ParseStyleSpec(absl::string_view pattern,
                                         const JsonValue& value) {
  StyleSpec spec;
  if (value.is_string()) {
    spec.style = value.string_value();
    return spec;
  }
  if (!value.is_object()) {
    return WrongType(absl::StrCat("\"", pattern, "\""), "string or object",
                     value);
  }
  const JsonValue* style = value.Find("style");
  if (style == nullptr || !style->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: \"", pattern, "\" needs a string \"style\""));
  }
  spec.style = style->string_value();
  DT_RETURN_IF_ERROR(ParseOptions(pattern, value, spec));
  return spec;
}

// The entries of a "tp" object, with their styles.
absl::StatusOr<std::vector<PlanEntry>> ParseTpEntries(absl::string_view key,
                                                      const JsonValue& value) {
  if (!value.is_object()) {
    return WrongType(absl::StrCat("\"", key, "\""), "object", value);
  }
  std::vector<PlanEntry> entries;
  for (const JsonValue::Member& member : value.members()) {
    PlanEntry entry;
    entry.pattern = member.first;
    DT_ASSIGN_OR_RETURN(entry.spec,
                        ParseStyleSpec(member.first, member.second));
    DT_ASSIGN_OR_RETURN(entry.style, StyleOf(entry));
    entries.push_back(std::move(entry));
  }
  return entries;
}

constexpr absl::string_view kPlanKeys[] = {"tp",
                                           "dp",
                                           "tp_dim",
                                           "dp_dim",
                                           "bucket_mb",
                                           "first_bucket_mb",
                                           "fsdp_groups",
                                           "fsdp_prefetch",
                                           "mixed_precision",
                                           "context_parallel",
                                           "activation_checkpoint"};
constexpr absl::string_view kHfPlanKeys[] = {"base_model_tp_plan", "tp_plan"};

// A Hugging Face config.json's tp plan: the key of the "base_model_tp_plan"
// or "tp_plan" member of `root` when it has one and none of our keys; empty
// otherwise. Error: both HF keys.
absl::StatusOr<absl::string_view> HfTpPlanKey(const JsonValue& root) {
  for (absl::string_view key : kPlanKeys) {
    if (root.Find(key) != nullptr) return absl::string_view();
  }
  absl::string_view found;
  for (absl::string_view key : kHfPlanKeys) {
    if (root.Find(key) == nullptr) continue;
    if (!found.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: config.json has both \"", found, "\" and \"", key,
                       "\"; keep one"));
    }
    found = key;
  }
  return found;
}

absl::StatusOr<DataParallel> ParseDataParallel(const JsonValue& value) {
  if (!value.is_string()) return WrongType("\"dp\"", "string", value);
  if (std::optional<DataParallel> dp =
          kDataParallelNames.Parse(value.string_value())) {
    return *dp;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("plan: unknown dp mode \"", value.string_value(),
                   "\" (known: ", kDataParallelNames.List(), ")"));
}

// A list of module-name patterns (`key`): non-empty strings.
absl::StatusOr<std::vector<std::string>> ParsePatterns(absl::string_view key,
                                                       const JsonValue& value) {
  const std::string quoted = absl::StrCat("\"", key, "\"");
  if (!value.is_array()) return WrongType(quoted, "array", value);
  std::vector<std::string> patterns;
  for (const JsonValue& item : value.items()) {
    if (!item.is_string() || item.string_value().empty()) {
      return WrongType(absl::StrCat("an entry of ", quoted), "non-empty string",
                       item);
    }
    patterns.push_back(item.string_value());
  }
  return patterns;
}

// "bucket_mb", "first_bucket_mb" (`key`): a positive number of MiB, at most
// 1 TiB.
absl::StatusOr<int64_t> ParseBucketBytes(absl::string_view key,
                                         const JsonValue& value) {
  const std::string quoted = absl::StrCat("\"", key, "\"");
  if (!value.is_number()) return WrongType(quoted, "number", value);
  const double mib = value.number_value();
  if (!(mib > 0 && mib <= (1 << 20))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: ", quoted, " is ", mib, "; it must be in (0, 1048576]"));
  }
  return std::max<int64_t>(1, static_cast<int64_t>(mib * (1 << 20)));
}

}  // namespace

absl::string_view DataParallelName(DataParallel dp) {
  return kDataParallelNames.Name(dp);
}

absl::StatusOr<std::shared_ptr<const ParallelStyle>> StyleOf(
    const PlanEntry& entry) {
  if (entry.style != nullptr) return entry.style;
  absl::StatusOr<std::shared_ptr<const ParallelStyle>> style =
      StyleRegistry::Global().Create(entry.spec.style, entry.spec);
  if (!style.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: \"", entry.pattern, "\": ", style.status().message()));
  }
  if (*style == nullptr) {
    return absl::InternalError(absl::StrCat("plan: the factory of style \"",
                                            entry.spec.style,
                                            "\" returned no style"));
  }
  return style;
}

absl::StatusOr<Plan> ParsePlan(absl::string_view json) {
  DT_ASSIGN_OR_RETURN(JsonValue root, ParseJson(json));
  if (!root.is_object()) return WrongType("the plan", "object", root);
  Plan plan;
  DT_ASSIGN_OR_RETURN(absl::string_view hf_key, HfTpPlanKey(root));
  if (!hf_key.empty()) {
    DT_ASSIGN_OR_RETURN(plan.tp, ParseTpEntries(hf_key, *root.Find(hf_key)));
    return plan;
  }
  for (const JsonValue::Member& member : root.members()) {
    const JsonValue& value = member.second;
    if (member.first == "tp_dim" || member.first == "dp_dim") {
      if (!value.is_string()) {
        return WrongType(absl::StrCat("\"", member.first, "\""), "string",
                         value);
      }
      (member.first == "tp_dim" ? plan.tp_dim : plan.dp_dim) =
          value.string_value();
    } else if (member.first == "dp") {
      DT_ASSIGN_OR_RETURN(plan.dp, ParseDataParallel(value));
    } else if (member.first == "bucket_mb") {
      DT_ASSIGN_OR_RETURN(plan.bucket_bytes,
                          ParseBucketBytes(member.first, value));
    } else if (member.first == "first_bucket_mb") {
      DT_ASSIGN_OR_RETURN(plan.first_bucket_bytes,
                          ParseBucketBytes(member.first, value));
    } else if (member.first == "tp") {
      DT_ASSIGN_OR_RETURN(plan.tp, ParseTpEntries("tp", value));
    } else if (member.first == "context_parallel") {
      DT_ASSIGN_OR_RETURN(plan.context_parallel, ParseContextParallel(value));
    } else if (member.first == "fsdp_groups") {
      DT_ASSIGN_OR_RETURN(plan.fsdp_groups, ParsePatterns(member.first, value));
    } else if (member.first == "fsdp_prefetch") {
      if (!value.is_bool()) {
        return WrongType("\"fsdp_prefetch\"", "bool", value);
      }
      plan.fsdp_prefetch = value.bool_value();
    } else if (member.first == "mixed_precision") {
      DT_ASSIGN_OR_RETURN(plan.mixed_precision,
                          ParseMixedPrecisionPolicy(value));
    } else if (member.first == "activation_checkpoint") {
      DT_ASSIGN_OR_RETURN(plan.activation_checkpoint,
                          ParseActivationCheckpointPlan(value));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: unknown key \"", member.first,
                       "\" (known: ", absl::StrJoin(kPlanKeys, ", "), ")"));
    }
  }
  if (plan.dp != DataParallel::kFsdp &&
      (root.Find("fsdp_groups") != nullptr ||
       root.Find("fsdp_prefetch") != nullptr)) {
    return absl::InvalidArgumentError(
        "plan: \"fsdp_groups\" and \"fsdp_prefetch\" need \"dp\": \"fsdp\"");
  }
  return plan;
}

absl::StatusOr<Plan> LoadPlanFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, kMaxPlanFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("plan: ", text.status().message()));
  }
  absl::StatusOr<Plan> plan = ParsePlan(*text);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(path, ": ", plan.status().message()));
  }
  return plan;
}

}  // namespace parallel
}  // namespace dtensor
