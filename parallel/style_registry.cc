#include "dtensor/parallel/style_registry.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/hf_styles.h"

namespace dtensor {
namespace parallel {
namespace {

using StylePtr = std::shared_ptr<const ParallelStyle>;

// A PyTorch style: takes every option.
template <typename S>
StyleFactory WithOptions() {
  return [](const StyleOptions& options) -> absl::StatusOr<StylePtr> {
    return std::make_shared<S>(options);
  };
}

// A Hugging Face name: a fixed style that takes no option.
StyleFactory Fixed(std::string name, std::function<StylePtr()> make) {
  return [name, make](const StyleOptions& options) -> absl::StatusOr<StylePtr> {
    absl::Status status = RejectOptions(name, options, {});
    if (!status.ok()) return status;
    return make();
  };
}

// HF's colwise_rep, rowwise_rep, local_colwise and local_rowwise: a PyTorch
// style with fixed options, named by the HF name.
template <typename S>
StyleFactory Alias(std::string name, StyleOptions fixed) {
  return Fixed(name,
               [name, fixed] { return std::make_shared<S>(fixed, name); });
}

StyleOptions Options(std::optional<std::string> input_layouts,
                     std::optional<std::string> output_layouts,
                     bool use_local_output) {
  StyleOptions options;
  options.input_layouts = std::move(input_layouts);
  options.output_layouts = std::move(output_layouts);
  options.use_local_output = use_local_output;
  return options;
}

void RegisterBuiltins(StyleRegistry& registry) {
  std::vector<std::pair<std::string, StyleFactory>> builtins = {
      {"colwise", WithOptions<ColwiseParallel>()},
      {"rowwise", WithOptions<RowwiseParallel>()},
      {"sequence_parallel", WithOptions<SequenceParallel>()},
      {"prepare_input", WithOptions<PrepareModuleInput>()},
      {"prepare_output", WithOptions<PrepareModuleOutput>()},
      {"loss_parallel", WithOptions<LossParallel>()},
      {"colwise_rep", Alias<ColwiseParallel>(
                          "colwise_rep", Options(std::nullopt, "R", false))},
      {"rowwise_rep", Alias<RowwiseParallel>(
                          "rowwise_rep", Options("R", std::nullopt, false))},
      {"local_colwise",
       Alias<ColwiseParallel>("local_colwise",
                              Options(std::nullopt, std::nullopt, true))},
      {"local_rowwise",
       Alias<RowwiseParallel>("local_rowwise",
                              Options(std::nullopt, std::nullopt, true))},
      {"local",
       Fixed("local", [] { return std::make_shared<LocalParallel>(); })},
      {"gather",
       Fixed("gather", [] { return std::make_shared<GatherParallel>(); })},
      {"replicate",
       Fixed("replicate",
             [] { return std::make_shared<ReplicateParallel>(); })},
  };
  for (auto& [name, factory] : builtins) {
    // Cannot fail: distinct non-empty names and non-null factories.
    registry.Register(name, std::move(factory)).IgnoreError();
  }
}

}  // namespace

StyleRegistry& StyleRegistry::Global() {
  static StyleRegistry* registry = NewRegistryWith(RegisterBuiltins);
  return *registry;
}

absl::Status StyleRegistry::Register(std::string name, StyleFactory factory) {
  if (!factory) {
    return absl::InvalidArgumentError(
        absl::StrCat("style registry: null factory for \"", name, "\""));
  }
  return factories_.Register(std::move(name), std::move(factory));
}

absl::StatusOr<std::shared_ptr<const ParallelStyle>> StyleRegistry::Create(
    absl::string_view name, const StyleOptions& options) const {
  DT_ASSIGN_OR_RETURN(StyleFactory factory, factories_.Find(name));
  return factory(options);
}

std::vector<std::string> StyleRegistry::Names() const {
  return factories_.Names();
}

absl::Status RejectOptions(absl::string_view style, const StyleOptions& options,
                           const std::vector<absl::string_view>& accepted) {
  const std::pair<absl::string_view, bool> given[] = {
      {"input_layouts", options.input_layouts.has_value()},
      {"output_layouts", options.output_layouts.has_value()},
      {"use_local_output", options.use_local_output},
  };
  for (const auto& [option, set] : given) {
    if (set &&
        std::find(accepted.begin(), accepted.end(), option) == accepted.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "style \"", style, "\" does not take option \"", option, "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
