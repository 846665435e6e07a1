#include "parallel/plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/json_value.h"
#include "base/status_macros.h"
#include "base/text_file.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr Style kStyles[] = {Style::kColwise,          Style::kRowwise,
                             Style::kSequenceParallel, Style::kPrepareInput,
                             Style::kPrepareOutput,    Style::kLossParallel};

absl::Status WrongType(absl::string_view where, absl::string_view expected,
                       const JsonValue& value) {
  return absl::InvalidArgumentError(absl::StrCat("plan: ", where, " must be a ",
                                                 expected, ", not a ",
                                                 JsonKindName(value.kind())));
}

absl::StatusOr<Style> ParseStyle(absl::string_view pattern,
                                 absl::string_view name) {
  for (Style style : kStyles) {
    if (StyleName(style) == name) return style;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("plan: unknown style \"", name, "\" for \"", pattern,
                   "\" (known: colwise, rowwise, sequence_parallel, "
                   "prepare_input, prepare_output, loss_parallel)"));
}

absl::StatusOr<std::string> StringOption(absl::string_view pattern,
                                         const JsonValue::Member& member) {
  if (!member.second.is_string()) {
    return WrongType(absl::StrCat("\"", pattern, "\".", member.first), "string",
                     member.second);
  }
  return member.second.string_value();
}

// A style entry: "colwise" or {"style": "colwise", options...}.
absl::StatusOr<StyleSpec> ParseStyleSpec(absl::string_view pattern,
                                         const JsonValue& value) {
  StyleSpec spec;
  if (value.is_string()) {
    DT_ASSIGN_OR_RETURN(spec.style, ParseStyle(pattern, value.string_value()));
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
  DT_ASSIGN_OR_RETURN(spec.style, ParseStyle(pattern, style->string_value()));
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
  return spec;
}

absl::StatusOr<DataParallel> ParseDataParallel(const JsonValue& value) {
  if (!value.is_string()) return WrongType("\"dp\"", "string", value);
  for (DataParallel dp :
       {DataParallel::kNone, DataParallel::kReplicate, DataParallel::kFsdp}) {
    if (DataParallelName(dp) == value.string_value()) return dp;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("plan: unknown dp mode \"", value.string_value(),
                   "\" (known: none, replicate, fsdp)"));
}

// The types a style may be applied to; empty means any.
std::vector<absl::string_view> AllowedTypes(Style style) {
  switch (style) {
    case Style::kColwise:
    case Style::kRowwise:
      return {"Linear", "Embedding"};
    case Style::kLossParallel:
      return {"Linear"};
    case Style::kSequenceParallel:
      return {"RMSNorm", "LayerNorm", "Dropout"};
    case Style::kPrepareInput:
    case Style::kPrepareOutput:
      return {};
  }
  return {};
}

// "bucket_mb": a positive number of MiB, at most 1 TiB.
absl::StatusOr<int64_t> ParseBucketBytes(const JsonValue& value) {
  if (!value.is_number()) return WrongType("\"bucket_mb\"", "number", value);
  const double mib = value.number_value();
  if (!(mib > 0 && mib <= (1 << 20))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: \"bucket_mb\" is ", mib, "; it must be in (0, 1048576]"));
  }
  return std::max<int64_t>(1, static_cast<int64_t>(mib * (1 << 20)));
}

}  // namespace

absl::string_view StyleName(Style style) {
  switch (style) {
    case Style::kColwise:
      return "colwise";
    case Style::kRowwise:
      return "rowwise";
    case Style::kSequenceParallel:
      return "sequence_parallel";
    case Style::kPrepareInput:
      return "prepare_input";
    case Style::kPrepareOutput:
      return "prepare_output";
    case Style::kLossParallel:
      return "loss_parallel";
  }
  return "unknown";
}

absl::string_view DataParallelName(DataParallel dp) {
  switch (dp) {
    case DataParallel::kNone:
      return "none";
    case DataParallel::kReplicate:
      return "replicate";
    case DataParallel::kFsdp:
      return "fsdp";
  }
  return "unknown";
}

absl::StatusOr<Plan> ParsePlan(absl::string_view json) {
  DT_ASSIGN_OR_RETURN(JsonValue root, ParseJson(json));
  if (!root.is_object()) return WrongType("the plan", "object", root);
  Plan plan;
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
      DT_ASSIGN_OR_RETURN(plan.bucket_bytes, ParseBucketBytes(value));
    } else if (member.first == "tp") {
      if (!value.is_object()) return WrongType("\"tp\"", "object", value);
      for (const JsonValue::Member& entry : value.members()) {
        DT_ASSIGN_OR_RETURN(StyleSpec spec,
                            ParseStyleSpec(entry.first, entry.second));
        plan.tp.push_back(PlanEntry{entry.first, spec});
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: unknown key \"", member.first,
                       "\" (known: tp, dp, tp_dim, dp_dim, bucket_mb)"));
    }
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

bool MatchPattern(absl::string_view pattern, absl::string_view fqn) {
  std::vector<absl::string_view> want = absl::StrSplit(pattern, '.');
  std::vector<absl::string_view> have = absl::StrSplit(fqn, '.');
  if (want.size() != have.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != "*" && want[i] != have[i]) return false;
  }
  return true;
}

absl::StatusOr<std::vector<ResolvedEntry>> ResolvePlan(const Plan& plan,
                                                       nn::Module& root,
                                                       const DeviceMesh& mesh) {
  if (!plan.tp.empty()) DT_RETURN_IF_ERROR(mesh.DimIndex(plan.tp_dim).status());
  if (plan.dp != DataParallel::kNone) {
    DT_RETURN_IF_ERROR(mesh.DimIndex(plan.dp_dim).status());
  }
  std::vector<nn::NamedModule> modules = root.NamedModules();
  std::vector<const PlanEntry*> owner(modules.size(), nullptr);
  for (const PlanEntry& entry : plan.tp) {
    bool matched = false;
    for (size_t i = 0; i < modules.size(); ++i) {
      if (!MatchPattern(entry.pattern, modules[i].name)) continue;
      matched = true;
      if (owner[i] != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan: module \"", modules[i].name, "\" is matched by both \"",
            owner[i]->pattern, "\" and \"", entry.pattern, "\""));
      }
      std::vector<absl::string_view> allowed = AllowedTypes(entry.spec.style);
      absl::string_view type = modules[i].module->type_name();
      if (!allowed.empty() &&
          std::find(allowed.begin(), allowed.end(), type) == allowed.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan: style ", StyleName(entry.spec.style), " of \"",
                         entry.pattern, "\" does not fit module \"",
                         modules[i].name, "\" of type ", type, " (needs ",
                         absl::StrJoin(allowed, " or "), ")"));
      }
      owner[i] = &entry;
    }
    if (!matched) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan: pattern \"", entry.pattern, "\" matches no module"));
    }
  }
  std::vector<ResolvedEntry> resolved;
  for (size_t i = 0; i < modules.size(); ++i) {
    if (owner[i] == nullptr) continue;
    resolved.push_back(
        ResolvedEntry{modules[i].name, modules[i].module, owner[i]});
  }
  return resolved;
}

}  // namespace parallel
}  // namespace dtensor
