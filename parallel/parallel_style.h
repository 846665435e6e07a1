#ifndef DTENSOR_PARALLEL_PARALLEL_STYLE_H_
#define DTENSOR_PARALLEL_PARALLEL_STYLE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/nn/module.h"
#include "dtensor/placement.h"

namespace dtensor {
namespace parallel {

// The options of a style, as PyTorch's parallel style classes take them.
// The *_layouts options (PyTorch's names) are the placement on the tp mesh
// dim as text ("R", "S(1)", "S(-1)", "P"), parsed when the style is applied
// (errors name the module).
struct StyleOptions {
  // The sharding of the module's input on the tp dim: the target it is
  // redistributed to (sequence_parallel, prepare_input), and for every style
  // how a tp-local input (see use_local_output) is read: it is wrapped onto
  // the full mesh with this placement (default: the style's input sharding,
  // colwise R, rowwise S(-1), sequence_parallel S(1)), like PyTorch's
  // from_local in its input preparation.
  std::optional<std::string> input_layouts;
  std::optional<std::string> output_layouts;
  // Whether the module's output is handed on as its tp-local value (true:
  // the rank's shard along the tp dim, as a DTensor on the mesh with the tp
  // dim cut to the rank's coordinate; dtensor/parallel/tp_local.h) or as the
  // global DTensor (false). The default is false, unlike PyTorch's true: our
  // modules compute on global shapes (Attention reshapes by the global head
  // count), so a local value fits only between modules that expect one, such as
  // a colwise Linear whose output an elementwise module transforms before a
  // rowwise Linear wraps it again (its input_layouts).
  bool use_local_output = false;
};

// What a style's hooks do to a module's activations on the tp dim.
struct StyleHooks {
  // The input is redistributed to this (none: left as it comes).
  std::optional<Placement> input;
  // A tp-local input is first wrapped onto the mesh with this placement
  // (none: a tp-local input passes as it is).
  std::optional<Placement> local_input;
  // A tp-local output is wrapped onto the mesh with this placement before
  // `output` applies (none: it passes as it is).
  std::optional<Placement> local_output;
  // The output is redistributed to this (none: left as propagated).
  std::optional<Placement> output;
  // The output is then handed on as its tp-local value.
  bool use_local_output = false;
};

// How one module (or one parameter) is split over the tensor-parallel mesh
// dim, like PyTorch's ParallelStyle. A style decides three things, and
// ParallelizeModule (dtensor/parallel/parallelize.h) acts on them: whether it
// fits a module, where each parameter slot of the module goes on the tp dim,
// and the hooks that move the module's activations. Styles are immutable
// values, shared by every module a plan entry matches; implementations must be
// thread-safe for concurrent const calls (ranks are threads).
class ParallelStyle {
 public:
  virtual ~ParallelStyle() = default;

  // The name plan files use ("colwise").
  virtual std::string name() const = 0;

  // OK when the style can be applied to `module` (whose name in the tree is
  // `fqn`, used only in the message).
  // Errors: InvalidArgument `does not fit module "<fqn>" of type <type>
  // (needs ...)` for a module of a type the style does not handle.
  virtual absl::Status CheckFits(const nn::Module& module,
                                 absl::string_view fqn) const = 0;

  // The placement on the tp dim of the parameter slot `slot` ("weight",
  // "bias") of `module`; nullopt keeps the parameter's current placement.
  // Requires: CheckFits(module) is OK (ParallelizeModule checks it first);
  // for other modules the answer is unspecified.
  virtual std::optional<Placement> ParameterPlacement(
      const nn::Module& module, absl::string_view slot) const = 0;

  // The hooks for `module` (named `fqn`, used only in messages).
  // Requires: CheckFits(module) is OK.
  // Errors: InvalidArgument for a sharding option that does not parse, naming
  // the text and `fqn`.
  virtual absl::StatusOr<StyleHooks> Hooks(const nn::Module& module,
                                           absl::string_view fqn) const = 0;
};

// CheckFits for a style that handles the module types `types`: OK when
// `module`'s type_name() is one of them, or when `types` is empty (any
// module).
// Errors: InvalidArgument naming `fqn`, the module's type and `types`.
absl::Status CheckModuleType(const nn::Module& module, absl::string_view fqn,
                             const std::vector<absl::string_view>& types);

// A sharding option (`text`: "R", "S(1)", "S(-1)", "P") parsed; nullopt for
// no text.
// Errors: InvalidArgument for text that is not a placement, naming the text
// and `fqn`.
absl::StatusOr<std::optional<Placement>> ParsePlacementOption(
    absl::string_view fqn, const std::optional<std::string>& text);

// The styles of PyTorch's torch.distributed.tensor.parallel, with the
// shardings of docs/parallel.md. Each carries its StyleOptions.
// `name` is the name the style was created under (a plan file's alias,
// such as Hugging Face's "colwise_rep", names its ColwiseParallel so).
class StyleWithOptions : public ParallelStyle {
 public:
  StyleWithOptions(std::string name, StyleOptions options)
      : name_(std::move(name)), options_(std::move(options)) {}
  std::string name() const final { return name_; }
  const StyleOptions& options() const { return options_; }

 protected:
  // The hooks with the options' shardings parsed: `input` and `output` as
  // given, local_input = input, use_local_output as given; a subclass then
  // fills in its defaults.
  // Errors: those of ParsePlacementOption.
  absl::StatusOr<StyleHooks> OptionHooks(absl::string_view fqn) const;

 private:
  std::string name_;
  StyleOptions options_;
};

// PyTorch's styles, as X(class, default name). Each is a StyleWithOptions
// constructed from (options = {}, name = default name), declaring the three
// per-module calls of ParallelStyle (parallel_style.cc defines them):
//   ColwiseParallel: Linear: weight [out, in] S(0), bias S(0); input to R;
//     output as output_layouts, else the propagated S(-1). Embedding: weight
//     S(1).
//   RowwiseParallel: Linear: weight S(1), bias R; input to S(-1); output
//     (partial) to output_layouts, default R (all-reduce; S(1):
//     reduce-scatter). Embedding: weight S(0), output to output_layouts
//     (default R).
//   SequenceParallel: RMSNorm, LayerNorm, Dropout: parameters R; input to
//     input_layouts, default S(1) (the sequence dim of [batch, seq, hidden]).
//   PrepareModuleInput: any module: parameters R; input to input_layouts and
//     output to output_layouts, each when given.
//   LossParallel: the final Linear: as colwise, the output kept S(-1)
//     (vocab-sharded logits; a loss computed under ops::LossParallelScope keeps
//     them so).
#define DTENSOR_TORCH_STYLES(X)            \
  X(ColwiseParallel, "colwise")            \
  X(RowwiseParallel, "rowwise")            \
  X(SequenceParallel, "sequence_parallel") \
  X(PrepareModuleInput, "prepare_input")   \
  X(LossParallel, "loss_parallel")

#define DTENSOR_DECLARE_TORCH_STYLE(Style, default_name)                       \
  class Style : public StyleWithOptions {                                      \
   public:                                                                     \
    explicit Style(StyleOptions options = {}, std::string name = default_name) \
        : StyleWithOptions(std::move(name), std::move(options)) {}             \
    absl::Status CheckFits(const nn::Module& module,                           \
                           absl::string_view fqn) const override;              \
    std::optional<Placement> ParameterPlacement(                               \
        const nn::Module& module, absl::string_view slot) const override;      \
    absl::StatusOr<StyleHooks> Hooks(const nn::Module& module,                 \
                                     absl::string_view fqn) const override;    \
  };
DTENSOR_TORCH_STYLES(DTENSOR_DECLARE_TORCH_STYLE)
#undef DTENSOR_DECLARE_TORCH_STYLE

// PrepareModuleOutput differs from PrepareModuleInput in name only: both
// options apply to both.
class PrepareModuleOutput : public PrepareModuleInput {
 public:
  explicit PrepareModuleOutput(StyleOptions options = {})
      : PrepareModuleInput(std::move(options), "prepare_output") {}
};

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_PARALLEL_STYLE_H_
