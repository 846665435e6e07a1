// Activation checkpointing: a checkpointed call runs its module's forward on
// a tape of its own (GradientTape::IsolatedScope), drops that tape, and
// records one function on the caller's tapes: inputs the module's input and
// parameters, outputs its output (and, in selective mode, the kept op
// outputs), arguments the parameter-to-input map and the Dropout offsets.
// The function's backward puts those values back, runs the forward again on
// a new tape (selective mode replaying the kept outputs through
// SetThreadDispatchSubstitute instead of running those ops) and takes the
// gradients of its inputs through that tape.
#include "dtensor/nn/checkpoint.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/dropout.h"
#include "dtensor/nn/function.h"
#include "dtensor/ops/dispatch_substitute.h"
#include "dtensor/ops/op_counter.h"

namespace dtensor {
namespace nn {
namespace {

// The recorded function's arguments: for each parameter of the subtree (in
// NamedParameters order) the index of the input holding its value (-1: the
// slot was undefined), and each Dropout's offset (NamedModules order).
constexpr ArgSpec kCheckpointArgs[] = {{"param_inputs", ArgKind::kInts, ""},
                                       {"dropout_offsets", ArgKind::kInts, ""}};
constexpr auto kParamInputs =
    KeyOf<ArgKind::kInts>(kCheckpointArgs, "param_inputs");
constexpr auto kDropoutOffsets =
    KeyOf<ArgKind::kInts>(kCheckpointArgs, "dropout_offsets");

// One checkpointed module: its policy and the function its calls record
// (which must outlive the tapes: it lives as long as the module's
// AroundForward).
struct CheckpointState {
  Module* module = nullptr;
  CheckpointPolicy policy;
  absl::flat_hash_set<std::string> saved_ops;
  Function function;

  bool Saves(absl::string_view op) const {
    return policy.mode == CheckpointPolicy::Mode::kSelective &&
           saved_ops.contains(op);
  }
};

std::vector<TensorSlot*> ParameterSlots(Module& module) {
  std::vector<TensorSlot*> slots;
  for (const NamedSlot& named : module.NamedParameters()) {
    slots.push_back(named.slot);
  }
  return slots;
}

std::vector<Dropout*> Dropouts(Module& module) {
  std::vector<Dropout*> dropouts;
  for (const NamedModule& named : module.NamedModules()) {
    if (auto* dropout = dynamic_cast<Dropout*>(named.module)) {
      dropouts.push_back(dropout);
    }
  }
  return dropouts;
}

// The kept outputs a recompute hands back, in the order forward made them.
struct Replay {
  const CheckpointState* state = nullptr;
  absl::Span<const DTensor> saved;
  size_t next = 0;
  int64_t replayed = 0;
};
thread_local Replay* active_replay = nullptr;
// IsRecomputing: the depth of recomputes running on this thread.
thread_local int recompute_depth = 0;

bool SubstituteSaved(const OpDef& op, OpOutputs& outputs) {
  Replay* replay = active_replay;
  if (replay == nullptr || !replay->state->Saves(op.name) ||
      replay->next + op.num_outputs > replay->saved.size()) {
    return false;
  }
  for (int k = 0; k < op.num_outputs; ++k) {
    outputs.push_back(replay->saved[replay->next++]);
  }
  ++replay->replayed;
  return true;
}

// Makes `replay` (null: none) the thread's while alive: a checkpointed module
// nested in another records and replays its own ops only.
class ReplayScope {
 public:
  explicit ReplayScope(Replay* replay)
      : previous_(std::exchange(active_replay, replay)),
        previous_substitute_(SetThreadDispatchSubstitute(
            replay != nullptr ? SubstituteSaved : nullptr)) {}
  ~ReplayScope() {
    active_replay = previous_;
    SetThreadDispatchSubstitute(previous_substitute_);
  }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;

 private:
  Replay* previous_;
  DispatchSubstitute previous_substitute_;
};

const std::vector<CheckpointTally*>& Tallies() {
  return CheckpointTally::Scope::Active();
}

absl::StatusOr<int64_t> BytesOf(const DTensor& x) {
  return LocalBytes(x.spec(), x.runtime()->rank());
}

// Adds a forward region to the active tallies: what `tape` (the region's
// forward) held beyond the record's inputs and outputs.
absl::Status TallyForward(const GradientTape& tape,
                          absl::Span<const DTensor> inputs,
                          absl::Span<const DTensor> outputs) {
  if (Tallies().empty()) return absl::OkStatus();
  absl::flat_hash_set<uint64_t> kept;
  for (const DTensor& x : inputs) kept.insert(x.id());
  kept.insert(outputs[0].id());
  int64_t saved = 0;
  for (const DTensor& x : outputs.subspan(1)) {
    if (!kept.insert(x.id()).second) continue;
    DT_ASSIGN_OR_RETURN(int64_t bytes, BytesOf(x));
    saved += bytes;
  }
  int64_t region = 0;
  for (const GradientTape::HeldTensor& held : tape.HeldTensors()) {
    if (held.recomputed || kept.contains(held.tensor.id())) continue;
    DT_ASSIGN_OR_RETURN(int64_t bytes, BytesOf(held.tensor));
    region += bytes;
  }
  for (CheckpointTally* tally : Tallies()) {
    ++tally->regions;
    tally->recomputed_bytes += region;
    tally->largest_region_bytes = std::max(tally->largest_region_bytes, region);
    tally->saved_bytes += saved;
  }
  return absl::OkStatus();
}

// The checkpointed call: see the file comment.
absl::StatusOr<DTensor> CheckpointedForward(const CheckpointState& state,
                                            Module& module, const DTensor& x) {
  if (!IsRecording()) return module.ForwardOnly(x);
  std::vector<DTensor> values = {x};
  std::vector<int64_t> param_inputs;
  for (TensorSlot* slot : ParameterSlots(module)) {
    const DTensor& value = slot->value;
    if (!value.defined()) {
      param_inputs.push_back(-1);
      continue;
    }
    // A tensor in two slots (tied weights) is one input.
    auto same =
        std::find_if(values.begin(), values.end(),
                     [&](const DTensor& v) { return v.id() == value.id(); });
    param_inputs.push_back(same - values.begin());
    if (same == values.end()) values.push_back(value);
  }
  std::vector<int64_t> offsets;
  for (Dropout* dropout : Dropouts(module)) {
    offsets.push_back(static_cast<int64_t>(dropout->offset()));
  }
  OpArgs args;
  args.AddInts(param_inputs).AddInts(offsets);
  GradientTape tape;
  std::vector<DTensor> outputs(1);
  {
    ReplayScope no_replay(nullptr);
    GradientTape::IsolatedScope recording(tape);
    DT_ASSIGN_OR_RETURN(outputs[0], module.ForwardOnly(x));
  }
  if (state.policy.mode == CheckpointPolicy::Mode::kSelective) {
    std::vector<DTensor> saved = tape.OpOutputsWhere(
        [&state](absl::string_view op) { return state.Saves(op); });
    outputs.insert(outputs.end(), saved.begin(), saved.end());
  }
  DT_RETURN_IF_ERROR(TallyForward(tape, values, outputs));
  std::vector<const DTensor*> inputs;
  for (const DTensor& v : values) inputs.push_back(&v);
  GradientTape::RecordFunction(state.function, inputs, args, outputs);
  return outputs[0];
}

// Runs module's forward again on `tape` with the values of `call` (the
// parameters it saw, the Dropout offsets it drew from, the kept outputs);
// the module's slots and offsets are put back afterwards.
absl::StatusOr<DTensor> Recompute(const CheckpointState& state,
                                  const BackwardCall& call,
                                  GradientTape& tape) {
  Module& module = *state.module;
  const std::vector<TensorSlot*> slots = ParameterSlots(module);
  const std::vector<Dropout*> dropouts = Dropouts(module);
  absl::Span<const int64_t> param_inputs = call.args.Get(kParamInputs);
  absl::Span<const int64_t> offsets = call.args.Get(kDropoutOffsets);
  if (param_inputs.size() != slots.size() ||
      offsets.size() != dropouts.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", module.type_name(),
        " checkpointed in forward has other parameters or Dropouts now"));
  }
  std::vector<DTensor> current;
  std::vector<uint64_t> current_offsets;
  for (size_t i = 0; i < slots.size(); ++i) {
    current.push_back(slots[i]->value);
    if (param_inputs[i] >= 0) slots[i]->value = call.inputs[param_inputs[i]];
  }
  for (size_t i = 0; i < dropouts.size(); ++i) {
    current_offsets.push_back(dropouts[i]->offset());
    dropouts[i]->set_offset(static_cast<uint64_t>(offsets[i]));
  }
  absl::Cleanup restore = [&] {
    for (size_t i = 0; i < slots.size(); ++i) slots[i]->value = current[i];
    for (size_t i = 0; i < dropouts.size(); ++i) {
      dropouts[i]->set_offset(current_offsets[i]);
    }
  };
  Replay replay{&state, call.outputs.subspan(1)};
  std::vector<std::unique_ptr<CommCounter::Scope>> counting;
  for (CheckpointTally* tally : Tallies()) {
    counting.push_back(
        std::make_unique<CommCounter::Scope>(tally->recompute_collectives));
  }
  DTensor y;
  {
    ReplayScope replaying(&replay);
    ++recompute_depth;
    absl::Cleanup recomputed = [] { --recompute_depth; };
    GradientTape::IsolatedScope recording(tape);
    DT_ASSIGN_OR_RETURN(y, module.ForwardOnly(call.inputs[0]));
  }
  if (replay.next != replay.saved.size()) {
    return absl::InternalError(absl::StrCat(
        "the recomputed forward of ", module.type_name(), " replayed ",
        replay.next, " of the ", replay.saved.size(), " kept outputs"));
  }
  for (CheckpointTally* tally : Tallies()) {
    tally->recomputed_calls +=
        static_cast<int64_t>(tape.num_records()) - replay.replayed;
  }
  return y;
}

absl::StatusOr<std::vector<DTensor>> CheckpointBackward(
    const CheckpointState& state, const BackwardCall& call) {
  if (call.grad_outputs.empty() || !call.grad_outputs[0].defined()) {
    return std::vector<DTensor>(call.inputs.size());
  }
  GradientTape tape;
  DT_ASSIGN_OR_RETURN(DTensor y, Recompute(state, call, tape));
  GradientOptions options;
  options.output_gradient = call.grad_outputs[0];
  // The caller's pass brings the gradients to their sources' shardings, as
  // it would without checkpointing.
  options.keep_propagated_shardings = true;
  return tape.Gradient(y, call.inputs, options);
}

}  // namespace

std::vector<std::string> CheckpointPolicy::DefaultSavedOps() {
  return {"linear", "matmul", "mm",
          "bmm",    "addmm",  "scaled_dot_product_attention"};
}

bool IsRecomputing() { return recompute_depth > 0; }

absl::string_view CheckpointModeName(CheckpointPolicy::Mode mode) {
  return mode == CheckpointPolicy::Mode::kFull ? "full" : "selective";
}

absl::StatusOr<CheckpointPolicy::Mode> ParseCheckpointMode(
    absl::string_view name) {
  if (name == "full") return CheckpointPolicy::Mode::kFull;
  if (name == "selective") return CheckpointPolicy::Mode::kSelective;
  return absl::InvalidArgumentError(
      absl::StrCat("activation checkpoint mode \"", name,
                   "\" is not \"full\" or \"selective\""));
}

absl::Status CheckpointModule(Module& module, CheckpointPolicy policy) {
  if (policy.mode == CheckpointPolicy::Mode::kSelective &&
      policy.saved_ops.empty()) {
    return absl::InvalidArgumentError(
        "selective activation checkpointing needs at least one op to keep");
  }
  auto state = std::make_shared<CheckpointState>();
  state->module = &module;
  state->saved_ops.insert(policy.saved_ops.begin(), policy.saved_ops.end());
  state->policy = std::move(policy);
  const CheckpointState* raw = state.get();
  state->function = Function{"activation_checkpoint",
                             [raw](const BackwardCall& call) {
                               return CheckpointBackward(*raw, call);
                             },
                             /*backward_reads_specs_only=*/false};
  module.SetAroundForward(
      [state](Module& self, const DTensor& x) -> absl::StatusOr<DTensor> {
        return CheckpointedForward(*state, self, x);
      });
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
