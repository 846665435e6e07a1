#include "dtensor/parallel/mixed_precision_policy.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr absl::string_view kFields[] = {"param_dtype", "reduce_dtype",
                                         "output_dtype"};

// The policy's fields in kFields order.
std::vector<std::pair<absl::string_view, std::optional<DType>*>> Fields(
    MixedPrecisionPolicy& policy) {
  return {{kFields[0], &policy.param_dtype},
          {kFields[1], &policy.reduce_dtype},
          {kFields[2], &policy.output_dtype}};
}

bool Allowed(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16;
}

}  // namespace

MixedPrecisionPolicy ComputeIn(DType param_dtype) {
  MixedPrecisionPolicy policy;
  policy.param_dtype = param_dtype;
  policy.reduce_dtype = DType::kF32;
  policy.output_dtype = DType::kF32;
  return policy;
}

absl::StatusOr<DType> ParseMixedPrecisionDType(absl::string_view field,
                                               absl::string_view name) {
  absl::StatusOr<DType> dtype =
      ParseDType(std::string_view(name.data(), name.size()));
  if (!dtype.ok() || !Allowed(*dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mixed precision: ", field, " \"", name,
                     "\" is not a dtype it takes (f32, bf16)"));
  }
  return *dtype;
}

absl::Status CheckMixedPrecisionPolicy(const MixedPrecisionPolicy& policy) {
  MixedPrecisionPolicy copy = policy;
  for (const auto& [field, dtype] : Fields(copy)) {
    if (dtype->has_value() && !Allowed(**dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mixed precision: ", field, " ", std::string(DTypeName(**dtype)),
          " is not a dtype it takes (f32, bf16)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MixedPrecisionPolicy> ParseMixedPrecisionPolicy(
    const JsonValue& value) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: \"mixed_precision\" must be an object, not a ",
                     JsonKindName(value.kind())));
  }
  MixedPrecisionPolicy policy;
  const auto fields = Fields(policy);
  for (const JsonValue::Member& member : value.members()) {
    auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) {
      return f.first == member.first;
    });
    if (it == fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan: unknown key \"", member.first, "\" in \"mixed_precision\" ",
          "(known: ", absl::StrJoin(kFields, ", "), ")"));
    }
    if (!member.second.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan: \"mixed_precision\".", member.first,
          " must be a string, not a ", JsonKindName(member.second.kind())));
    }
    absl::StatusOr<DType> dtype =
        ParseMixedPrecisionDType(member.first, member.second.string_value());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: ", dtype.status().message()));
    }
    *it->second = *dtype;
  }
  return policy;
}

std::string MixedPrecisionToString(const MixedPrecisionPolicy& policy) {
  MixedPrecisionPolicy copy = policy;
  std::vector<std::string> parts;
  for (const auto& [field, dtype] : Fields(copy)) {
    if (dtype->has_value()) {
      parts.push_back(
          absl::StrCat(field, "=", std::string(DTypeName(**dtype))));
    }
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, " ");
}

}  // namespace parallel
}  // namespace dtensor
