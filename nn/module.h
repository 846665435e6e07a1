#ifndef DTENSOR_NN_MODULE_H_
#define DTENSOR_NN_MODULE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/initializer.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

// A parameter or buffer of a module: a named DTensor with a fixed global
// shape and the rule that initializes it. `value` is undefined until the tree
// is initialized (dtensor/nn/init.h) or loaded (dtensor/nn/state_dict.h);
// afterwards it may be replaced by any DTensor of the same global shape
// (another sharding, mesh or dtype), which is how a parallelizer re-lays out a
// module.
struct TensorSlot {
  std::string name;  // Local to its module: "weight".
  Shape shape;       // Global.
  Initializer init;
  // A parameter is trained; a buffer is state (running statistics, tables)
  // that is saved but not trained.
  bool is_parameter = true;
  DTensor value;
};

class Module;

// A slot or a module with its fully-qualified name in a tree
// ("layers.3.attention.wq.weight", "layers.3.attention.wq").
struct NamedSlot {
  std::string name;
  TensorSlot* slot;
};
struct NamedModule {
  std::string name;
  Module* module;
};

// A node of a module tree: parameters and buffers (TensorSlots), named
// children, and a forward function from one DTensor to one DTensor written
// with ops (dtensor/ops/*_ops.h), so that it runs on any sharding and under a
// metadata-only runtime, and an active autograd tape records it.
//
// Modules are neither copyable nor movable (slots and children keep stable
// addresses); trees are held by unique_ptr. A module belongs to the rank
// (thread) that built it.
//
// Fully-qualified names join the names on the path from the root with ".";
// the root's name is "". Traversals are pre-order: a module's own slots in
// registration order, then its children in registration order, as in
// PyTorch.
class Module {
 public:
  // A function applied to a module's input before Forward (input hook) or to
  // its output after (output hook), e.g. a redistribution.
  using Hook = std::function<absl::StatusOr<DTensor>(const DTensor&)>;

  struct Child {
    std::string name;
    std::unique_ptr<Module> module;
  };

  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The kind of module: "Linear", "RMSNorm", "Attention", ...
  virtual absl::string_view type_name() const = 0;

  // Runs the input hooks in order, Forward, then the output hooks in order;
  // then, however that went, the exit hooks in order.
  // Modules call their children this way, so hooks apply inside a tree. The
  // collectives issued meanwhile are owned by this module (CommOwner; the
  // innermost module's when nested), in forward and, through the gradient
  // tape, in backward.
  absl::StatusOr<DTensor> operator()(const DTensor& input);

  void AddInputHook(Hook hook) { input_hooks_.push_back(std::move(hook)); }
  void AddOutputHook(Hook hook) { output_hooks_.push_back(std::move(hook)); }
  // A function run when every call returns, after the output hooks, whether
  // the call succeeded or failed (an input hook, Forward or an output hook
  // returned an error): for state a call must restore, such as FSDP's
  // gathered parameters.
  using ExitHook = std::function<void()>;
  void AddExitHook(ExitHook hook) { exit_hooks_.push_back(std::move(hook)); }
  void ClearHooks();
  // What operator() runs in place of Forward, between the input and the
  // output hooks: `around` gets this module and the hooked input and calls
  // ForwardOnly itself, once or more (activation checkpointing runs it
  // without keeping its activations and again in backward:
  // dtensor/nn/checkpoint.h). Null: Forward. ClearHooks keeps it.
  using AroundForward =
      std::function<absl::StatusOr<DTensor>(Module&, const DTensor&)>;
  void SetAroundForward(AroundForward around) { around_ = std::move(around); }
  bool has_around_forward() const { return around_ != nullptr; }
  // Forward alone: no hooks, no AroundForward (the children's hooks run, as
  // Forward calls them).
  absl::StatusOr<DTensor> ForwardOnly(const DTensor& input) {
    return Forward(input);
  }
  int64_t num_input_hooks() const {
    return static_cast<int64_t>(input_hooks_.size());
  }
  int64_t num_output_hooks() const {
    return static_cast<int64_t>(output_hooks_.size());
  }
  // Whether operator() does anything besides Forward: a hook of any kind or
  // an AroundForward. A module without may be computed by a fused op in its
  // caller's place (RMSNorm::ForwardWithResidual).
  bool has_hooks() const {
    return !input_hooks_.empty() || !output_hooks_.empty() ||
           !exit_hooks_.empty() || around_ != nullptr;
  }

  // Training mode (the default) or evaluation mode (dropout is off); set on
  // the whole subtree.
  bool training() const { return training_; }
  void SetTraining(bool training);

  // This module's own slots (not its children's) in registration order.
  absl::Span<TensorSlot> slots() { return absl::MakeSpan(slots_); }
  absl::Span<const TensorSlot> slots() const { return slots_; }
  const std::vector<Child>& children() const { return children_; }

  // The subtree, pre-order: this module first, named "".
  std::vector<NamedModule> NamedModules();
  // Parameters, buffers, or both (each module's slots in registration order).
  std::vector<NamedSlot> NamedParameters();
  std::vector<NamedSlot> NamedBuffers();
  std::vector<NamedSlot> NamedSlots();
  // Elements of all parameters (global shapes).
  int64_t NumParameters() const;

  // The module at `fqn` ("" is this one); NotFound names the first missing
  // component.
  absl::StatusOr<Module*> Submodule(absl::string_view fqn);
  // The slot at `fqn`; NotFound names it.
  absl::StatusOr<TensorSlot*> FindSlot(absl::string_view fqn);
  // Replaces the value of the slot at `fqn`. Errors: NotFound, or a value
  // whose global shape differs from the slot's (naming both).
  absl::Status SetSlot(absl::string_view fqn, DTensor value);

  // The tree as text, one module a line, like PyTorch's repr:
  //   Transformer(
  //     (tok_embeddings): Embedding(64, 32)
  //     ...
  //   )
  std::string ToString() const;

 protected:
  Module() = default;

  // The computation; called by operator() between the hooks.
  virtual absl::StatusOr<DTensor> Forward(const DTensor& input) = 0;
  // The text inside the parentheses of this module's ToString line
  // ("64, 32"); empty by default.
  virtual std::string ExtraRepr() const { return ""; }

  // Register a parameter or buffer and return its index in slots(). Errors:
  // an empty name, a name containing ".", a name already taken by a slot or
  // child of this module, a negative size.
  absl::StatusOr<int> AddParameter(std::string name, Shape shape,
                                   Initializer init);
  absl::StatusOr<int> AddBuffer(std::string name, Shape shape,
                                Initializer init);
  // Registers a child (errors as for AddParameter, and a null module) and
  // returns it.
  template <typename M>
  absl::StatusOr<M*> AddModule(std::string name, std::unique_ptr<M> module) {
    M* raw = module.get();
    absl::Status status = AddChild(std::move(name), std::move(module));
    if (!status.ok()) return status;
    return raw;
  }

  // The value of slot `index` (an index AddParameter/AddBuffer returned).
  const DTensor& value(int index) const { return slots_[index].value; }

 private:
  absl::Status CheckNewName(absl::string_view name) const;
  absl::StatusOr<int> AddSlot(std::string name, Shape shape, Initializer init,
                              bool is_parameter);
  absl::Status AddChild(std::string name, std::unique_ptr<Module> module);
  // Appends the subtree's modules / matching slots under `prefix`.
  void CollectModules(const std::string& prefix, std::vector<NamedModule>& out);
  void CollectSlots(const std::string& prefix, bool parameters, bool buffers,
                    std::vector<NamedSlot>& out);
  void AppendTree(const std::string& name, int indent, std::string& out) const;

  std::vector<TensorSlot> slots_;
  std::vector<Child> children_;
  std::vector<Hook> input_hooks_;
  std::vector<Hook> output_hooks_;
  std::vector<ExitHook> exit_hooks_;
  AroundForward around_;
  bool training_ = true;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_MODULE_H_
