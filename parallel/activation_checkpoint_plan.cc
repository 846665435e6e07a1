#include "dtensor/parallel/activation_checkpoint_plan.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace parallel {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("plan: \"activation_checkpoint\": ", what));
}

// A non-empty list of non-empty strings (`key` names it in errors).
absl::StatusOr<std::vector<std::string>> Strings(absl::string_view key,
                                                 const JsonValue& value) {
  if (!value.is_array() || value.items().empty()) {
    return Invalid(absl::StrCat(key, " must be a non-empty list of strings"));
  }
  std::vector<std::string> strings;
  for (const JsonValue& item : value.items()) {
    if (!item.is_string() || item.string_value().empty()) {
      return Invalid(absl::StrCat(key, " must hold non-empty strings"));
    }
    strings.push_back(item.string_value());
  }
  return strings;
}

}  // namespace

absl::StatusOr<ActivationCheckpointPlan> ParseActivationCheckpointPlan(
    const JsonValue& value) {
  ActivationCheckpointPlan plan;
  if (value.is_array()) {
    DT_ASSIGN_OR_RETURN(plan.modules, Strings("the module patterns", value));
    return plan;
  }
  if (!value.is_object()) {
    return Invalid("must be a list of module patterns or an object");
  }
  for (const JsonValue::Member& member : value.members()) {
    if (member.first == "modules") {
      DT_ASSIGN_OR_RETURN(plan.modules, Strings("\"modules\"", member.second));
    } else if (member.first == "saved_ops") {
      DT_ASSIGN_OR_RETURN(plan.saved_ops,
                          Strings("\"saved_ops\"", member.second));
    } else if (member.first == "mode") {
      const JsonValue& mode = member.second;
      if (!mode.is_string() || (mode.string_value() != "full" &&
                                mode.string_value() != "selective")) {
        return Invalid("\"mode\" must be \"full\" or \"selective\"");
      }
      plan.mode = mode.string_value();
    } else {
      return Invalid(absl::StrCat("unknown key \"", member.first,
                                  "\" (known: modules, mode, saved_ops)"));
    }
  }
  if (plan.modules.empty()) return Invalid("\"modules\" is missing");
  if (plan.mode == "full" && !plan.saved_ops.empty()) {
    return Invalid("\"saved_ops\" needs \"mode\": \"selective\"");
  }
  return plan;
}

}  // namespace parallel
}  // namespace dtensor
