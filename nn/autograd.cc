#include "nn/autograd.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "dtensor/comm_owner.h"
#include "ops/backward_helpers.h"
#include "ops/dispatch.h"
#include "ops/elementwise_ops.h"
#include "tensor/elementwise.h"
#include "tensor/status_macros.h"

namespace dtensor {
namespace nn {
namespace {

// What records on this thread: the tapes with an active scope (innermost
// last, a tape once per scope) and the NoGrad depth.
struct ThreadRecording {
  std::vector<GradientTape*> tapes;
  int paused = 0;
  // The observers replaced when the first scope started.
  DispatchObserver previous_dispatch = nullptr;
  RedistributeObserver previous_redistribute = nullptr;
};

ThreadRecording& Recording() {
  thread_local ThreadRecording recording;
  return recording;
}

// A redistribution as the tape records it: an op whose backward sends the
// gradient back to the input's layout (Partials as Replicate).
const OpDef& RedistributeDef() {
  static const OpDef* def = [] {
    auto* d = new OpDef;
    d->name = "redistribute";
    d->summary = "DTensor::Redistribute (recorded by autograd)";
    d->backward =
        [](const BackwardCall& call) -> absl::StatusOr<std::vector<DTensor>> {
      const Sharding target = ops::WithoutPartials(call.inputs[0].sharding());
      DTensor grad = call.grad_outputs[0];
      if (grad.sharding() != target) {
        DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(target));
      }
      return std::vector<DTensor>{std::move(grad)};
    };
    return d;
  }();
  return *def;
}

bool IsDifferentiable(const DTensor& x) {
  return x.defined() && IsFloatingPoint(x.dtype());
}

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

// The mesh dims where `partial` is Partial(sum) and `complete` Replicate,
// when their layouts differ only there (so that partial's layout is that of
// their sum); empty otherwise.
absl::InlinedVector<int64_t, 4> CompletedDims(const Sharding& partial,
                                              const Sharding& complete) {
  absl::InlinedVector<int64_t, 4> dims;
  if (ops::WithoutPartials(partial) != ops::WithoutPartials(complete)) {
    return dims;
  }
  for (int64_t m = 0; m < partial.mesh_ndim(); ++m) {
    const Placement p = partial.placement(m);
    const Placement c = complete.placement(m);
    if (p == c) continue;
    if (p != Placement::Partial(ReduceOp::kSum) || !c.is_replicate()) {
      return {};
    }
    dims.push_back(m);
  }
  return dims;
}

// partial + complete, laid out as `partial`, where `complete` is Replicate
// along the mesh dims `dims` on which `partial` is Partial(sum): the complete
// term is added on the ranks at coordinate 0 along `dims` only, and the other
// ranks keep their partial terms. (ops::Add would turn `complete` Partial
// first: fresh zeros on the other ranks, added there.) The sum over `dims`
// is the same; no collective either way.
absl::StatusOr<DTensor> AddCompleteToPartial(const DTensor& partial,
                                             const DTensor& complete,
                                             absl::Span<const int64_t> dims) {
  const Runtime& runtime = *partial.runtime();
  Tensor local;
  if (!runtime.metadata_only()) {
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                        partial.mesh().CoordinateOf(runtime.rank()));
    const bool first =
        std::all_of(dims.begin(), dims.end(),
                    [&coord](int64_t m) { return coord[m] == 0; });
    if (first) {
      DT_ASSIGN_OR_RETURN(local, Add(partial.local(), complete.local()));
    } else {
      local = partial.local();
    }
  }
  return DTensor::WrapUnchecked(partial.runtime(), partial.spec_ptr(),
                                std::move(local));
}

// Adds `grad` to the gradient accumulated in `sum` (undefined: none yet), a
// gradient of the same tensor (shape and dtype).
absl::Status Accumulate(DTensor& sum, DTensor grad) {
  if (!sum.defined()) {
    sum = std::move(grad);
    return absl::OkStatus();
  }
  // A complete gradient meeting a partial one (a residual's gradient and a
  // row-parallel layer's input gradient) is added without zeros.
  for (const auto& [partial, complete] :
       {std::pair<const DTensor*, const DTensor*>{&sum, &grad},
        std::pair<const DTensor*, const DTensor*>{&grad, &sum}}) {
    const absl::InlinedVector<int64_t, 4> dims =
        CompletedDims(partial->sharding(), complete->sharding());
    if (!dims.empty() && partial->mesh() == complete->mesh()) {
      DT_ASSIGN_OR_RETURN(sum, AddCompleteToPartial(*partial, *complete, dims));
      return absl::OkStatus();
    }
  }
  DT_ASSIGN_OR_RETURN(sum, ops::Add(sum, grad));
  return absl::OkStatus();
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
absl::Status CheckInputGradient(const OpDef& op, size_t i, const DTensor& input,
                                const DTensor& grad) {
  if (grad.shape() != input.shape() || grad.dtype() != input.dtype()) {
    return absl::InternalError(absl::StrCat(
        "the backward of ", op.name, " gave input ", i, " a gradient ",
        ShapeToString(grad.shape()), " ", std::string(DTypeName(grad.dtype())),
        "; the input is ", ShapeToString(input.shape()), " ",
        std::string(DTypeName(input.dtype()))));
  }
  return absl::OkStatus();
}

// The tapes with an active scope on this thread, each once.
std::vector<GradientTape*> ActiveTapes() {
  std::vector<GradientTape*> tapes;
  for (GradientTape* tape : Recording().tapes) {
    if (std::find(tapes.begin(), tapes.end(), tape) == tapes.end()) {
      tapes.push_back(tape);
    }
  }
  return tapes;
}

absl::Status CheckRecomputable(const DTensor& value, const DTensor& source) {
  if (!value.defined() || !source.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RecomputeInBackward: the ",
                     value.defined() ? "source" : "value", " is undefined"));
  }
  if (value.mesh() != source.mesh() || value.shape() != source.shape() ||
      value.dtype() != source.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RecomputeInBackward: ", value.spec().ToString(),
                     " cannot be rebuilt from ", source.spec().ToString(),
                     " (mesh, shape and dtype must agree)"));
  }
  return absl::OkStatus();
}

}  // namespace

GradientTape::Scope::Scope(GradientTape& tape) : tape_(&tape) {
  ThreadRecording& recording = Recording();
  if (recording.tapes.empty()) {
    recording.previous_dispatch = SetThreadDispatchObserver(ObserveDispatch);
    recording.previous_redistribute =
        SetThreadRedistributeObserver(ObserveRedistribute);
  }
  recording.tapes.push_back(tape_);
}

GradientTape::Scope::~Scope() {
  ThreadRecording& recording = Recording();
  auto last =
      std::find(recording.tapes.rbegin(), recording.tapes.rend(), tape_);
  recording.tapes.erase(std::next(last).base());
  if (recording.tapes.empty()) {
    SetThreadDispatchObserver(recording.previous_dispatch);
    SetThreadRedistributeObserver(recording.previous_redistribute);
  }
}

void GradientTape::ObserveDispatch(const OpDef& op,
                                   absl::Span<const DTensor* const> inputs,
                                   const OpArgs& args,
                                   absl::Span<const DTensor> outputs) {
  RecordOnThread(op, inputs, args, outputs);
}

void GradientTape::ObserveRedistribute(const DTensor& input,
                                       const DTensor& output) {
  const DTensor* inputs[] = {&input};
  RecordOnThread(RedistributeDef(), inputs, OpArgs(),
                 absl::MakeConstSpan(&output, 1));
}

void GradientTape::RecordFunction(const OpDef& def,
                                  absl::Span<const DTensor* const> inputs,
                                  const OpArgs& args,
                                  absl::Span<const DTensor> outputs) {
  RecordOnThread(def, inputs, args, outputs);
}

void GradientTape::RecordOnThread(const OpDef& op,
                                  absl::Span<const DTensor* const> inputs,
                                  const OpArgs& args,
                                  absl::Span<const DTensor> outputs) {
  if (Recording().paused > 0) return;
  for (GradientTape* tape : ActiveTapes()) {
    Record record{
        &op,
        std::vector<DTensor>(std::max<size_t>(op.num_inputs, inputs.size())),
        args,
        std::vector<DTensor>(outputs.begin(), outputs.end()),
        {},
        {}};
    record.comm_owner = CommOwner::Current();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] != nullptr) record.inputs[i] = *inputs[i];
    }
    for (const DTensor& x : record.inputs) record.input_ids.push_back(x.id());
    for (const DTensor& x : record.outputs) {
      record.output_ids.push_back(x.id());
    }
    if (!tape->recomputed_.empty()) tape->UseStandIns(record);
    tape->records_.push_back(std::move(record));
  }
}

absl::Status GradientTape::RecomputeInBackward(const DTensor& value,
                                               const DTensor& source) {
  DT_RETURN_IF_ERROR(CheckRecomputable(value, source));
  if (value.id() == source.id()) return absl::OkStatus();
  const DTensor stand_in =
      DTensor::WrapUnchecked(value.runtime(), value.spec_ptr(), Tensor());
  for (GradientTape* tape : ActiveTapes()) {
    tape->recomputed_.insert_or_assign(value.id(), Recompute{source, stand_in});
    tape->UseStandIn(value.id(), stand_in);
  }
  return absl::OkStatus();
}

void GradientTape::UseStandIns(Record& record) {
  for (size_t i = 0; i < record.inputs.size(); ++i) {
    auto found = recomputed_.find(record.input_ids[i]);
    if (found != recomputed_.end()) record.inputs[i] = found->second.stand_in;
  }
  // A redistribution of a recomputed tensor (a local slice of it is a view
  // of its storage) is rebuilt from the same source.
  if (record.op != &RedistributeDef()) return;
  auto found = recomputed_.find(record.input_ids[0]);
  if (found == recomputed_.end()) return;
  DTensor& output = record.outputs[0];
  Recompute derived{
      found->second.source,
      DTensor::WrapUnchecked(output.runtime(), output.spec_ptr(), Tensor())};
  output = derived.stand_in;
  recomputed_.insert_or_assign(record.output_ids[0], std::move(derived));
}

void GradientTape::UseStandIn(uint64_t id, const DTensor& stand_in) {
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    for (size_t i = 0; i < it->inputs.size(); ++i) {
      if (it->input_ids[i] == id) it->inputs[i] = stand_in;
    }
    bool made_here = false;
    for (size_t j = 0; j < it->outputs.size(); ++j) {
      if (it->output_ids[j] != id) continue;
      it->outputs[j] = stand_in;
      made_here = true;
    }
    // Earlier records cannot hold a tensor made later.
    if (made_here) return;
  }
}

absl::Status GradientTape::Rebuild(
    absl::Span<const uint64_t> ids, std::vector<DTensor>& tensors,
    absl::flat_hash_map<uint64_t, DTensor>& rebuilt) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    auto recompute = recomputed_.find(ids[i]);
    if (recompute == recomputed_.end()) continue;
    auto found = rebuilt.find(ids[i]);
    if (found == rebuilt.end()) {
      const Recompute& r = recompute->second;
      DTensor value = r.source;
      if (value.sharding() != r.stand_in.sharding()) {
        DT_ASSIGN_OR_RETURN(value, value.Redistribute(r.stand_in.sharding()));
      }
      found = rebuilt.emplace(ids[i], std::move(value)).first;
    }
    tensors[i] = found->second;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DTensor>> GradientTape::Gradient(
    const DTensor& target, absl::Span<const DTensor> sources,
    const GradientOptions& options) const {
  NoGrad not_recorded;
  DT_ASSIGN_OR_RETURN(DTensor seed, SeedGradient(target, options));
  DT_RETURN_IF_ERROR(CheckSources(sources));

  // Each id hashed once: the per-tensor state below lives in vectors indexed
  // by slot. Record r's inputs, then outputs, have slots from first_slot[r].
  SlotNumbering numbering;
  std::vector<int32_t> slots;
  std::vector<size_t> first_slot(records_.size());
  for (size_t r = 0; r < records_.size(); ++r) {
    first_slot[r] = slots.size();
    for (uint64_t id : records_[r].input_ids) {
      slots.push_back(numbering.SlotOf(id));
    }
    for (uint64_t id : records_[r].output_ids) {
      slots.push_back(numbering.SlotOf(id));
    }
  }
  std::vector<int32_t> source_slots;
  source_slots.reserve(sources.size());
  for (const DTensor& s : sources) {
    source_slots.push_back(numbering.SlotOf(s.id()));
  }
  const int32_t target_slot = numbering.SlotOf(target.id());

  // The recorded tensors that depend on a source: only their gradients are
  // computed.
  std::vector<bool> is_source(numbering.size());
  for (int32_t slot : source_slots) is_source[slot] = true;
  std::vector<bool> depends = is_source;
  // For each tensor recomputed in backward, the earliest record holding it:
  // its rebuilt value is dropped after that record.
  absl::flat_hash_map<uint64_t, size_t> earliest_use;
  for (size_t r = 0; r < records_.size(); ++r) {
    const Record& record = records_[r];
    const int32_t* input_slots = slots.data() + first_slot[r];
    const int32_t* output_slots = input_slots + record.inputs.size();
    bool reached = false;
    for (size_t i = 0; i < record.inputs.size(); ++i) {
      reached =
          reached || (record.inputs[i].defined() && depends[input_slots[i]]);
    }
    if (!recomputed_.empty()) {
      for (const std::vector<uint64_t>* ids :
           {&record.input_ids, &record.output_ids}) {
        for (uint64_t id : *ids) {
          if (recomputed_.contains(id)) earliest_use.try_emplace(id, r);
        }
      }
    }
    if (!reached) continue;
    for (size_t j = 0; j < record.outputs.size(); ++j) {
      if (IsDifferentiable(record.outputs[j])) depends[output_slots[j]] = true;
    }
  }

  // Backward, the gradient of each tensor complete once every later call
  // that used it has been run; a tensor's gradient is dropped once used,
  // unless it is a source.
  std::vector<DTensor> grads(numbering.size());
  if (depends[target_slot]) grads[target_slot] = seed;
  // Tensors recomputed in backward, rebuilt while records still need them.
  absl::flat_hash_map<size_t, std::vector<uint64_t>> last_needed_by;
  for (const auto& [id, earliest] : earliest_use) {
    last_needed_by[earliest].push_back(id);
  }
  absl::flat_hash_map<uint64_t, DTensor> rebuilt;
  // Per source, the owner of the earliest call that used it (its last
  // gradient contribution): the redistribution of its gradient to its layout
  // is that owner's communication.
  std::vector<const void*> source_owner(numbering.size(), nullptr);
  for (size_t r = records_.size(); r-- > 0;) {
    const Record& record = records_[r];
    const int32_t* input_slots = slots.data() + first_slot[r];
    const int32_t* output_slots = input_slots + record.inputs.size();
    auto drop_rebuilt = [&] {
      auto found = last_needed_by.find(r);
      if (found == last_needed_by.end()) return;
      for (uint64_t id : found->second) rebuilt.erase(id);
    };
    std::vector<DTensor> grad_outputs(record.outputs.size());
    bool any = false;
    for (size_t j = 0; j < record.outputs.size(); ++j) {
      DTensor& grad = grads[output_slots[j]];
      if (!grad.defined()) continue;
      any = true;
      grad_outputs[j] =
          is_source[output_slots[j]] ? grad : std::exchange(grad, DTensor());
    }
    if (!any) {
      drop_rebuilt();
      continue;
    }
    const OpDef& op = *record.op;
    if (!op.backward) {
      return absl::UnimplementedError(absl::StrCat(
          "Gradient: op ", op.name,
          " is on the path from a source to the target but has no backward "
          "definition"));
    }
    // The backward's collectives (rebuilds included) are owned like the
    // call's forward ones.
    CommOwner::Scope owner(record.comm_owner);
    // A recorded redistribution's backward reads only its input's layout,
    // which the stand-ins carry; other records' stand-ins are replaced by
    // their rebuilt tensors, in copies.
    absl::Span<const DTensor> inputs = record.inputs;
    absl::Span<const DTensor> outputs = record.outputs;
    std::vector<DTensor> rebuilt_inputs;
    std::vector<DTensor> rebuilt_outputs;
    if (!recomputed_.empty() && &op != &RedistributeDef()) {
      rebuilt_inputs = record.inputs;
      rebuilt_outputs = record.outputs;
      DT_RETURN_IF_ERROR(Rebuild(record.input_ids, rebuilt_inputs, rebuilt));
      DT_RETURN_IF_ERROR(Rebuild(record.output_ids, rebuilt_outputs, rebuilt));
      inputs = rebuilt_inputs;
      outputs = rebuilt_outputs;
    }
    drop_rebuilt();
    const BackwardCall call{inputs, record.args, outputs, grad_outputs};
    absl::StatusOr<std::vector<DTensor>> input_grads = op.backward(call);
    if (!input_grads.ok()) {
      return absl::Status(input_grads.status().code(),
                          absl::StrCat("backward of ", op.name, ": ",
                                       input_grads.status().message()));
    }
    if (input_grads->size() != record.inputs.size()) {
      return absl::InternalError(absl::StrCat(
          "the backward of ", op.name, " returned ", input_grads->size(),
          " gradients for ", record.inputs.size(), " inputs"));
    }
    for (size_t i = 0; i < record.inputs.size(); ++i) {
      const DTensor& input = record.inputs[i];
      DTensor& grad = (*input_grads)[i];
      const int32_t slot = input_slots[i];
      if (!grad.defined() || !IsDifferentiable(input) || !depends[slot]) {
        continue;
      }
      DT_RETURN_IF_ERROR(CheckInputGradient(op, i, input, grad));
      if (is_source[slot]) source_owner[slot] = record.comm_owner;
      DT_RETURN_IF_ERROR(Accumulate(grads[slot], std::move(grad)));
    }
  }

  std::vector<DTensor> result;
  result.reserve(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    const DTensor& source = sources[s];
    const int32_t slot = source_slots[s];
    DTensor grad;
    if (grads[slot].defined() && IsDifferentiable(source)) {
      grad = grads[slot];
    } else {
      DT_ASSIGN_OR_RETURN(grad, ops::FullLike(source, 0));
    }
    const Sharding layout = ops::WithoutPartials(source.sharding());
    if (!options.keep_propagated_layouts && grad.sharding() != layout) {
      CommOwner::Scope owner(source_owner[slot]);
      DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(layout));
    }
    result.push_back(std::move(grad));
  }
  return result;
}

std::vector<GradientTape::HeldTensor> GradientTape::HeldTensors() const {
  std::vector<HeldTensor> held;
  absl::flat_hash_set<uint64_t> seen;
  auto add = [&](absl::Span<const DTensor> tensors,
                 absl::Span<const uint64_t> ids) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i].defined() || !seen.insert(ids[i]).second) continue;
      held.push_back({tensors[i], recomputed_.contains(ids[i])});
    }
  };
  for (const Record& record : records_) {
    add(record.inputs, record.input_ids);
    add(record.outputs, record.output_ids);
  }
  return held;
}

NoGrad::NoGrad() { ++Recording().paused; }

NoGrad::~NoGrad() { --Recording().paused; }

bool IsRecording() {
  const ThreadRecording& recording = Recording();
  return !recording.tapes.empty() && recording.paused == 0;
}

}  // namespace nn
}  // namespace dtensor
