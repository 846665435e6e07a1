// The backward half of GradientTape: Gradient() and the pass that walks the
// records in reverse.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_owner.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/gradient_sum.h"
#include "dtensor/ops/backward_helpers.h"

namespace dtensor {
namespace nn {

bool IsDifferentiable(const DTensor& x) {
  return x.defined() && IsFloatingPoint(x.dtype());
}

namespace {

absl::Status CheckSources(absl::Span<const DTensor> sources) {
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!sources[i].defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradient: source ", i, " is undefined"));
    }
  }
  return absl::OkStatus();
}

// The gradient that seeds the backward pass: the given one, or 1 for a
// one-element target.
absl::StatusOr<DTensor> SeedGradient(const DTensor& target,
                                     const GradientOptions& options) {
  if (!target.defined()) {
    return absl::InvalidArgumentError("Gradient: the target is undefined");
  }
  if (!IsFloatingPoint(target.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gradient: the target has dtype ",
                     std::string(DTypeName(target.dtype())),
                     "; only floating tensors have gradients"));
  }
  const DTensor& given = options.output_gradient;
  if (given.defined()) {
    if (given.shape() != target.shape() || given.dtype() != target.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Gradient: output_gradient ", ShapeToString(given.shape()), " ",
          std::string(DTypeName(given.dtype())), " does not match the target ",
          ShapeToString(target.shape()), " ",
          std::string(DTypeName(target.dtype()))));
    }
    return given;
  }
  if (NumElements(target.shape()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Gradient: the target of shape ", ShapeToString(target.shape()),
        " is not a scalar; pass its gradient as "
        "GradientOptions::output_gradient"));
  }
  return ops::FullLike(target, 1);
}

// A dense numbering of the tensor ids a backward pass meets, in order of
// first sight, so that its per-tensor state lives in vectors indexed by slot
// instead of maps hashed on every access.
class SlotNumbering {
 public:
  // The slot of `id`, a new one (size() before the call) if first seen.
  int32_t SlotOf(uint64_t id) {
    return slots_.try_emplace(id, static_cast<int32_t>(slots_.size()))
        .first->second;
  }
  // The number of slots given.
  int32_t size() const { return static_cast<int32_t>(slots_.size()); }

 private:
  absl::flat_hash_map<uint64_t, int32_t> slots_;
};

// Checks that a backward gave input `i` a gradient it can take.
absl::Status CheckInputGradient(absl::string_view name, size_t i,
                                const DTensor& input, const DTensor& grad) {
  if (grad.shape() != input.shape() || grad.dtype() != input.dtype()) {
    return absl::InternalError(absl::StrCat(
        "the backward of ", name, " gave input ", i, " a gradient ",
        ShapeToString(grad.shape()), " ", std::string(DTypeName(grad.dtype())),
        "; the input is ", ShapeToString(input.shape()), " ",
        std::string(DTypeName(input.dtype()))));
  }
  return absl::OkStatus();
}
}  // namespace

// One Gradient() call: the per-tensor state of its backward walk and the
// steps that fill it, in order (MarkDependencies, FindEarliestUses,
// RunBackward, FinishSourceGradients). Each id is hashed once: the
// per-tensor state lives in vectors indexed by slot.
class GradientTape::BackwardPass {
 public:
  // Numbers the records' tensors, then the sources and the target. `tape`
  // and `sources` must outlive the pass.
  BackwardPass(const GradientTape& tape, const DTensor& target,
               absl::Span<const DTensor> sources);

  // Marks the recorded tensors that depend on a source: only their gradients
  // are computed.
  void MarkDependencies();
  // For each tensor recomputed in backward, the earliest record holding it:
  // its rebuilt value is dropped after that record.
  void FindEarliestUses();
  // With options.on_gradient_ready, or when gradients are brought to their
  // sources' shardings (settle_when_ready_), for each source the earliest
  // record holding it: its gradient is final after that record's backward.
  void FindReadyPoints(const GradientOptions& options);
  // Backward from the target's gradient `seed`, the gradient of each tensor
  // complete once every later call that used it has been run; a tensor's
  // gradient is dropped once used, unless it is a source.
  absl::Status RunBackward(const DTensor& seed);
  // Hands the sources whose gradient became final at record r to
  // on_gradient_ready, or brings them to their shardings (settle_when_ready_).
  absl::Status ReportReady(size_t r);
  // Each source's gradient (zeros where it got none), brought to its
  // source's sharding unless `options` keeps propagated shardings.
  absl::StatusOr<std::vector<DTensor>> FinishSourceGradients(
      const GradientOptions& options);

 private:
  // Hands `grad`, source s's final gradient, to on_gradient_ready; with
  // release_handed_over, clears `grad` (the pass's reference).
  absl::Status HandOver(size_t s, DTensor& grad);
  // `grad`, source s's gradient, in s's sharding (Partials completed).
  absl::StatusOr<DTensor> InSourceSharding(size_t s, const DTensor& grad) const;
  // The slots of record r's inputs and outputs.
  const int32_t* InputSlots(size_t r) const {
    return slots_.data() + first_slot_[r];
  }
  const int32_t* OutputSlots(size_t r) const {
    return InputSlots(r) + tape_.records_[r].inputs.size();
  }
  // Runs record r's backward if one of its outputs has a gradient, and
  // accumulates its inputs' gradients.
  absl::Status BackwardOf(size_t r);
  // Moves record r's output gradients (copies them, for sources) into
  // `grad_outputs`; false if none is defined.
  bool TakeOutputGradients(size_t r, std::vector<DTensor>& grad_outputs);
  // Record r's backward (its op has one), on its tensors with stand-ins
  // rebuilt; its error prefixed with the op's name.
  absl::StatusOr<std::vector<DTensor>> CallBackward(
      size_t r, absl::Span<const DTensor> grad_outputs);
  // Replaces the stand-ins among `tensors` (with `ids`) by their rebuilt
  // tensors, rebuilding those not yet in rebuilt_.
  absl::Status Rebuild(absl::Span<const uint64_t> ids,
                       std::vector<DTensor>& tensors);
  // Drops the rebuilt tensors that no record before r holds.
  void DropRebuilt(size_t r);
  // Adds `input_grads`, record r's backward's result, to its inputs'
  // gradients.
  absl::Status AccumulateInputGradients(size_t r,
                                        std::vector<DTensor>& input_grads);

  const GradientTape& tape_;
  absl::Span<const DTensor> sources_;
  // Record r's inputs, then outputs, have slots from first_slot_[r].
  std::vector<int32_t> slots_;
  std::vector<size_t> first_slot_;
  std::vector<int32_t> source_slots_;
  int32_t target_slot_ = 0;
  // By slot.
  std::vector<bool> is_source_;
  std::vector<bool> depends_;
  std::vector<DTensor> grads_;
  // Per source, the owner of the earliest call that used it (its last
  // gradient contribution): the redistribution of its gradient to its sharding
  // is that owner's communication.
  std::vector<const void*> source_owner_;
  // Tensors recomputed in backward, rebuilt while records still need them:
  // by id, and the ids each record is the earliest to hold.
  absl::flat_hash_map<uint64_t, DTensor> rebuilt_;
  absl::flat_hash_map<size_t, std::vector<uint64_t>> last_needed_by_;
  // The sources (by index) whose gradient is final after each record, and
  // the callback they go to (empty: none).
  absl::flat_hash_map<size_t, std::vector<size_t>> ready_after_;
  std::vector<bool> reported_;
  std::function<absl::Status(size_t, const DTensor&)> on_ready_;
  std::function<absl::Status()> after_ready_;
  bool release_handed_over_ = false;
  // Without a callback, and unless the caller keeps propagated shardings, a
  // source's gradient is brought to its sharding as soon as it is final, so
  // that a large propagated gradient (an FSDP parameter's, full on dp) is
  // reduced and freed during the pass rather than all at its end.
  bool settle_when_ready_ = false;
};

GradientTape::BackwardPass::BackwardPass(const GradientTape& tape,
                                         const DTensor& target,
                                         absl::Span<const DTensor> sources)
    : tape_(tape), sources_(sources), first_slot_(tape.records_.size()) {
  SlotNumbering numbering;
  for (size_t r = 0; r < tape_.records_.size(); ++r) {
    first_slot_[r] = slots_.size();
    for (uint64_t id : tape_.records_[r].input_ids) {
      slots_.push_back(numbering.SlotOf(id));
    }
    for (uint64_t id : tape_.records_[r].output_ids) {
      slots_.push_back(numbering.SlotOf(id));
    }
  }
  source_slots_.reserve(sources.size());
  for (const DTensor& s : sources) {
    source_slots_.push_back(numbering.SlotOf(s.id()));
  }
  target_slot_ = numbering.SlotOf(target.id());
  is_source_.resize(numbering.size());
  for (int32_t slot : source_slots_) is_source_[slot] = true;
  grads_.resize(numbering.size());
  source_owner_.resize(numbering.size(), nullptr);
}

void GradientTape::BackwardPass::MarkDependencies() {
  depends_ = is_source_;
  for (size_t r = 0; r < tape_.records_.size(); ++r) {
    const Record& record = tape_.records_[r];
    const int32_t* input_slots = InputSlots(r);
    bool reached = false;
    for (size_t i = 0; i < record.inputs.size(); ++i) {
      reached =
          reached || (record.inputs[i].defined() && depends_[input_slots[i]]);
    }
    if (!reached) continue;
    const int32_t* output_slots = OutputSlots(r);
    for (size_t j = 0; j < record.outputs.size(); ++j) {
      if (IsDifferentiable(record.outputs[j])) depends_[output_slots[j]] = true;
    }
  }
}

void GradientTape::BackwardPass::FindEarliestUses() {
  if (tape_.recomputed_.empty()) return;
  std::vector<bool> seen(grads_.size());
  for (size_t r = 0; r < tape_.records_.size(); ++r) {
    const Record& record = tape_.records_[r];
    // The record's slots, inputs then outputs, as its ids below.
    const int32_t* slot = InputSlots(r);
    for (const std::vector<uint64_t>* ids :
         {&record.input_ids, &record.output_ids}) {
      for (uint64_t id : *ids) {
        const int32_t s = *slot++;
        if (seen[s] || !tape_.recomputed_.contains(id)) continue;
        seen[s] = true;
        last_needed_by_[r].push_back(id);
      }
    }
  }
}

void GradientTape::BackwardPass::FindReadyPoints(
    const GradientOptions& options) {
  settle_when_ready_ =
      !options.on_gradient_ready && !options.keep_propagated_shardings;
  if (!options.on_gradient_ready && !settle_when_ready_) return;
  on_ready_ = options.on_gradient_ready;
  after_ready_ = options.after_gradients_ready;
  release_handed_over_ = options.release_handed_over;
  reported_.resize(sources_.size());
  // The earliest record holding each slot.
  std::vector<size_t> earliest(grads_.size(), tape_.records_.size());
  for (size_t r = tape_.records_.size(); r-- > 0;) {
    const size_t n =
        tape_.records_[r].inputs.size() + tape_.records_[r].outputs.size();
    const int32_t* slot = InputSlots(r);
    for (size_t k = 0; k < n; ++k) earliest[slot[k]] = r;
  }
  for (size_t s = 0; s < sources_.size(); ++s) {
    const size_t r = earliest[source_slots_[s]];
    if (r < tape_.records_.size()) ready_after_[r].push_back(s);
  }
}

absl::Status GradientTape::BackwardPass::ReportReady(size_t r) {
  auto found = ready_after_.find(r);
  if (found == ready_after_.end()) return absl::OkStatus();
  const void* last_owner = nullptr;
  bool handed_over = false;
  for (size_t s : found->second) {
    DTensor& grad = grads_[source_slots_[s]];
    if (!grad.defined() || !IsDifferentiable(sources_[s])) continue;
    last_owner = source_owner_[source_slots_[s]];
    CommOwner::Scope owner(last_owner);
    if (settle_when_ready_) {
      DT_ASSIGN_OR_RETURN(grad, InSourceSharding(s, grad));
      continue;
    }
    handed_over = true;
    DT_RETURN_IF_ERROR(HandOver(s, grad));
  }
  if (!handed_over || !after_ready_) return absl::OkStatus();
  CommOwner::Scope owner(last_owner);
  return after_ready_();
}

absl::Status GradientTape::BackwardPass::RunBackward(const DTensor& seed) {
  ProfilePhaseScope phase(ProfilePhase::kBackward);
  if (depends_[target_slot_]) grads_[target_slot_] = seed;
  for (size_t r = tape_.records_.size(); r-- > 0;) {
    DT_RETURN_IF_ERROR(BackwardOf(r));
    DT_RETURN_IF_ERROR(ReportReady(r));
  }
  return absl::OkStatus();
}

absl::Status GradientTape::BackwardPass::BackwardOf(size_t r) {
  const Record& record = tape_.records_[r];
  std::vector<DTensor> grad_outputs(record.outputs.size());
  if (!TakeOutputGradients(r, grad_outputs)) {
    DropRebuilt(r);
    return absl::OkStatus();
  }
  const Recorded& recorded = record.recorded;
  if (recorded.backward == nullptr || !*recorded.backward) {
    return absl::UnimplementedError(absl::StrCat(
        "Gradient: op ", recorded.name,
        " is on the path from a source to the target but has no backward "
        "definition"));
  }
  // The backward's collectives (rebuilds included) are owned like the
  // call's forward ones.
  CommOwner::Scope owner(record.comm_owner);
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> input_grads,
                      CallBackward(r, grad_outputs));
  return AccumulateInputGradients(r, input_grads);
}

bool GradientTape::BackwardPass::TakeOutputGradients(
    size_t r, std::vector<DTensor>& grad_outputs) {
  const int32_t* output_slots = OutputSlots(r);
  bool any = false;
  for (size_t j = 0; j < grad_outputs.size(); ++j) {
    DTensor& grad = grads_[output_slots[j]];
    if (!grad.defined()) continue;
    any = true;
    grad_outputs[j] =
        is_source_[output_slots[j]] ? grad : std::exchange(grad, DTensor());
  }
  return any;
}

absl::StatusOr<std::vector<DTensor>> GradientTape::BackwardPass::CallBackward(
    size_t r, absl::Span<const DTensor> grad_outputs) {
  const Record& record = tape_.records_[r];
  const Recorded& recorded = record.recorded;
  // A recorded redistribution's backward (or a function's that says so)
  // reads only shardings, which the stand-ins carry; other records' stand-ins
  // are replaced by their rebuilt tensors, in copies.
  absl::Span<const DTensor> inputs = record.inputs;
  absl::Span<const DTensor> outputs = record.outputs;
  std::vector<DTensor> rebuilt_inputs;
  std::vector<DTensor> rebuilt_outputs;
  if (!tape_.recomputed_.empty() && !recorded.reads_specs_only) {
    rebuilt_inputs = record.inputs;
    rebuilt_outputs = record.outputs;
    DT_RETURN_IF_ERROR(Rebuild(record.input_ids, rebuilt_inputs));
    DT_RETURN_IF_ERROR(Rebuild(record.output_ids, rebuilt_outputs));
    inputs = rebuilt_inputs;
    outputs = rebuilt_outputs;
  }
  DropRebuilt(r);
  const BackwardCall call{inputs, record.args, outputs, grad_outputs};
  absl::StatusOr<std::vector<DTensor>> input_grads = (*recorded.backward)(call);
  if (!input_grads.ok()) {
    return absl::Status(input_grads.status().code(),
                        absl::StrCat("backward of ", recorded.name, ": ",
                                     input_grads.status().message()));
  }
  if (input_grads->size() != record.inputs.size()) {
    return absl::InternalError(absl::StrCat(
        "the backward of ", recorded.name, " returned ", input_grads->size(),
        " gradients for ", record.inputs.size(), " inputs"));
  }
  return input_grads;
}

absl::Status GradientTape::BackwardPass::Rebuild(
    absl::Span<const uint64_t> ids, std::vector<DTensor>& tensors) {
  for (size_t i = 0; i < ids.size(); ++i) {
    auto recompute = tape_.recomputed_.find(ids[i]);
    if (recompute == tape_.recomputed_.end()) continue;
    auto found = rebuilt_.find(ids[i]);
    if (found == rebuilt_.end()) {
      const Recompute& r = recompute->second;
      DTensor value = r.source;
      if (r.rebuild) {
        DT_ASSIGN_OR_RETURN(value, r.rebuild());
      }
      if (value.sharding() != r.stand_in.sharding()) {
        DT_ASSIGN_OR_RETURN(value, value.Redistribute(r.stand_in.sharding()));
      }
      found = rebuilt_.emplace(ids[i], std::move(value)).first;
    }
    tensors[i] = found->second;
  }
  return absl::OkStatus();
}

void GradientTape::BackwardPass::DropRebuilt(size_t r) {
  auto found = last_needed_by_.find(r);
  if (found == last_needed_by_.end()) return;
  for (uint64_t id : found->second) rebuilt_.erase(id);
}

absl::Status GradientTape::BackwardPass::AccumulateInputGradients(
    size_t r, std::vector<DTensor>& input_grads) {
  const Record& record = tape_.records_[r];
  const int32_t* input_slots = InputSlots(r);
  for (size_t i = 0; i < record.inputs.size(); ++i) {
    const DTensor& input = record.inputs[i];
    DTensor& grad = input_grads[i];
    const int32_t slot = input_slots[i];
    if (!grad.defined() || !IsDifferentiable(input) || !depends_[slot]) {
      continue;
    }
    DT_RETURN_IF_ERROR(
        CheckInputGradient(record.recorded.name, i, input, grad));
    if (is_source_[slot]) source_owner_[slot] = record.comm_owner;
    DT_RETURN_IF_ERROR(AddGradient(grads_[slot], std::move(grad)));
  }
  return absl::OkStatus();
}

absl::Status GradientTape::BackwardPass::HandOver(size_t s, DTensor& grad) {
  reported_[s] = true;
  DT_RETURN_IF_ERROR(on_ready_(s, grad));
  if (release_handed_over_) grad = DTensor();
  return absl::OkStatus();
}

absl::StatusOr<DTensor> GradientTape::BackwardPass::InSourceSharding(
    size_t s, const DTensor& grad) const {
  const Sharding sharding = sources_[s].sharding().WithoutPartials();
  if (grad.sharding() == sharding) return grad;
  return grad.Redistribute(sharding);
}

absl::StatusOr<std::vector<DTensor>>
GradientTape::BackwardPass::FinishSourceGradients(
    const GradientOptions& options) {
  std::vector<DTensor> result(sources_.size());
  bool handed_over = false;
  for (size_t s = 0; s < sources_.size(); ++s) {
    if (on_ready_ && reported_[s] && release_handed_over_) continue;
    const DTensor& source = sources_[s];
    const int32_t slot = source_slots_[s];
    DTensor grad;
    if (grads_[slot].defined() && IsDifferentiable(source)) {
      grad = grads_[slot];
    } else {
      DT_ASSIGN_OR_RETURN(grad, ops::FullLike(source, 0));
    }
    CommOwner::Scope owner(source_owner_[slot]);
    if (on_ready_ && !reported_[s]) {
      handed_over = true;
      DT_RETURN_IF_ERROR(HandOver(s, grad));
      if (!grad.defined()) continue;  // released
    }
    if (!options.keep_propagated_shardings) {
      DT_ASSIGN_OR_RETURN(grad, InSourceSharding(s, grad));
    }
    result[s] = std::move(grad);
  }
  if (handed_over && after_ready_) {
    DT_RETURN_IF_ERROR(after_ready_());
  }
  return result;
}

absl::StatusOr<std::vector<DTensor>> GradientTape::Gradient(
    const DTensor& target, absl::Span<const DTensor> sources,
    const GradientOptions& options) const {
  NoGrad not_recorded;
  DT_ASSIGN_OR_RETURN(DTensor seed, SeedGradient(target, options));
  DT_RETURN_IF_ERROR(CheckSources(sources));
  BackwardPass pass(*this, target, sources);
  pass.MarkDependencies();
  pass.FindEarliestUses();
  pass.FindReadyPoints(options);
  DT_RETURN_IF_ERROR(pass.RunBackward(seed));
  return pass.FinishSourceGradients(options);
}

}  // namespace nn
}  // namespace dtensor
