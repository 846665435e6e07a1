#include "dtensor/parallel/parallel_style.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace parallel {
namespace {

bool IsEmbedding(const nn::Module& module) {
  return module.type_name() == "Embedding";
}

}  // namespace

absl::Status CheckModuleType(const nn::Module& module, absl::string_view fqn,
                             const std::vector<absl::string_view>& types) {
  absl::string_view type = module.type_name();
  if (types.empty() ||
      std::find(types.begin(), types.end(), type) != types.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("does not fit module \"", fqn, "\" of type ", type,
                   " (needs ", absl::StrJoin(types, " or "), ")"));
}

absl::StatusOr<std::optional<Placement>> ParsePlacementOption(
    absl::string_view fqn, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  absl::StatusOr<Placement> placement = ParsePlacement(*text);
  if (!placement.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: bad layout \"", *text, "\" for \"", fqn,
                     "\": ", placement.status().message()));
  }
  return std::optional<Placement>(*placement);
}

absl::StatusOr<StyleHooks> StyleWithOptions::OptionHooks(
    absl::string_view fqn) const {
  StyleHooks hooks;
  DT_ASSIGN_OR_RETURN(hooks.input,
                      ParsePlacementOption(fqn, options_.input_layouts));
  DT_ASSIGN_OR_RETURN(hooks.output,
                      ParsePlacementOption(fqn, options_.output_layouts));
  hooks.local_input = hooks.input;
  hooks.use_local_output = options_.use_local_output;
  return hooks;
}

absl::Status ColwiseParallel::CheckFits(const nn::Module& module,
                                        absl::string_view fqn) const {
  return CheckModuleType(module, fqn, {"Linear", "Embedding"});
}

std::optional<Placement> ColwiseParallel::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  return Placement::Shard(IsEmbedding(module) ? 1 : 0);
}

absl::StatusOr<StyleHooks> ColwiseParallel::Hooks(const nn::Module& module,
                                                  absl::string_view fqn) const {
  DT_ASSIGN_OR_RETURN(StyleHooks hooks, OptionHooks(fqn));
  // Token ids of an embedding are replicated already.
  hooks.input = IsEmbedding(module) ? std::nullopt
                                    : std::optional(Placement::Replicate());
  if (!hooks.local_input) hooks.local_input = hooks.input;
  return hooks;
}

absl::Status RowwiseParallel::CheckFits(const nn::Module& module,
                                        absl::string_view fqn) const {
  return CheckModuleType(module, fqn, {"Linear", "Embedding"});
}

std::optional<Placement> RowwiseParallel::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  if (IsEmbedding(module)) return Placement::Shard(0);
  return slot == "weight" ? Placement::Shard(1) : Placement::Replicate();
}

absl::StatusOr<StyleHooks> RowwiseParallel::Hooks(const nn::Module& module,
                                                  absl::string_view fqn) const {
  DT_ASSIGN_OR_RETURN(StyleHooks hooks, OptionHooks(fqn));
  hooks.input =
      IsEmbedding(module) ? std::nullopt : std::optional(Placement::Shard(-1));
  if (!hooks.local_input) hooks.local_input = hooks.input;
  if (!hooks.output) hooks.output = Placement::Replicate();
  return hooks;
}

absl::Status SequenceParallel::CheckFits(const nn::Module& module,
                                         absl::string_view fqn) const {
  return CheckModuleType(module, fqn, {"RMSNorm", "LayerNorm", "Dropout"});
}

std::optional<Placement> SequenceParallel::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  return Placement::Replicate();
}

absl::StatusOr<StyleHooks> SequenceParallel::Hooks(
    const nn::Module& module, absl::string_view fqn) const {
  DT_ASSIGN_OR_RETURN(StyleHooks hooks, OptionHooks(fqn));
  if (!hooks.input) hooks.input = Placement::Shard(1);
  hooks.local_input = hooks.input;
  return hooks;
}

absl::Status PrepareModuleInput::CheckFits(const nn::Module& module,
                                           absl::string_view fqn) const {
  return CheckModuleType(module, fqn, {});
}

std::optional<Placement> PrepareModuleInput::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  return Placement::Replicate();
}

absl::StatusOr<StyleHooks> PrepareModuleInput::Hooks(
    const nn::Module& module, absl::string_view fqn) const {
  return OptionHooks(fqn);
}

absl::Status LossParallel::CheckFits(const nn::Module& module,
                                     absl::string_view fqn) const {
  return CheckModuleType(module, fqn, {"Linear"});
}

std::optional<Placement> LossParallel::ParameterPlacement(
    const nn::Module& module, absl::string_view slot) const {
  return Placement::Shard(0);
}

absl::StatusOr<StyleHooks> LossParallel::Hooks(const nn::Module& module,
                                               absl::string_view fqn) const {
  DT_ASSIGN_OR_RETURN(StyleHooks hooks, OptionHooks(fqn));
  hooks.input = Placement::Replicate();
  if (!hooks.local_input) hooks.local_input = hooks.input;
  hooks.output = Placement::Shard(-1);
  return hooks;
}

}  // namespace parallel
}  // namespace dtensor
