// The recording half of GradientTape: scopes, the observers that append
// records, custom functions, and the stand-ins of tensors recomputed in
// backward.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_owner.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/dispatch.h"

namespace dtensor {
namespace nn {

// What records on this thread: the tapes with an active scope (innermost
// last, a tape once per scope) and the NoGrad depth.
struct GradientTape::ThreadRecording {
  std::vector<GradientTape*> tapes;
  int paused = 0;
  // The observers replaced when the first scope started.
  DispatchObserver previous_dispatch = nullptr;
  RedistributeObserver previous_redistribute = nullptr;
};

namespace {

using ThreadRecording = GradientTape::ThreadRecording;

ThreadRecording& Recording() {
  thread_local ThreadRecording recording;
  return recording;
}

// A redistribution as the tape records it: a function whose backward sends
// the gradient back to the input's sharding (Partials as Replicate).
const Function& RedistributeFunction() {
  static const Function function{
      "redistribute",
      [](const BackwardCall& call) -> absl::StatusOr<std::vector<DTensor>> {
        const Sharding target = call.inputs[0].sharding().WithoutPartials();
        DTensor grad = call.grad_outputs[0];
        if (grad.sharding() != target) {
          DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(target));
        }
        return std::vector<DTensor>{std::move(grad)};
      }};
  return function;
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

// `same_dtype`: a value rebuilt by redistributing its source has its dtype;
// one a rebuild function makes may be a cast of it.
absl::Status CheckRecomputable(const DTensor& value, const DTensor& source,
                               bool same_dtype) {
  if (!value.defined() || !source.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RecomputeInBackward: the ",
                     value.defined() ? "source" : "value", " is undefined"));
  }
  if (value.mesh() != source.mesh() || value.shape() != source.shape() ||
      (same_dtype && value.dtype() != source.dtype())) {
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

GradientTape::IsolatedScope::IsolatedScope(GradientTape& tape) {
  ThreadRecording& recording = Recording();
  outer_ = std::make_unique<ThreadRecording>(recording);
  recording.tapes.clear();
  recording.paused = 0;
  // With no tape left, the scope installs the observers; ending, it puts
  // back those it found (the outer scopes' own, if any).
  scope_ = std::make_unique<Scope>(tape);
}

GradientTape::IsolatedScope::~IsolatedScope() {
  scope_.reset();
  // The outer scopes' tapes, pause and the observers they replaced.
  Recording() = std::move(*outer_);
}

void GradientTape::ObserveDispatch(const OpDef& op,
                                   absl::Span<const DTensor* const> inputs,
                                   const OpArgs& args,
                                   absl::Span<const DTensor> outputs) {
  RecordOnThread({op.name, &op.backward, /*is_redistribution=*/false,
                  /*reads_specs_only=*/false, /*is_op=*/true},
                 op.num_inputs, inputs, args, outputs);
}

void GradientTape::ObserveRedistribute(const DTensor& input,
                                       const DTensor& output) {
  const DTensor* inputs[] = {&input};
  const Function& function = RedistributeFunction();
  RecordOnThread({function.name, &function.backward,
                  /*is_redistribution=*/true, /*reads_specs_only=*/true},
                 1, inputs, OpArgs(), absl::MakeConstSpan(&output, 1));
}

void GradientTape::RecordFunction(const Function& function,
                                  absl::Span<const DTensor* const> inputs,
                                  const OpArgs& args,
                                  absl::Span<const DTensor> outputs) {
  RecordOnThread(
      {function.name, &function.backward,
       /*is_redistribution=*/false, function.backward_reads_specs_only},
      inputs.size(), inputs, args, outputs);
}

void GradientTape::RecordOnThread(const Recorded& recorded, size_t num_inputs,
                                  absl::Span<const DTensor* const> inputs,
                                  const OpArgs& args,
                                  absl::Span<const DTensor> outputs) {
  if (Recording().paused > 0) return;
  for (GradientTape* tape : ActiveTapes()) {
    Record record{
        recorded, std::vector<DTensor>(std::max(num_inputs, inputs.size())),
        args,     std::vector<DTensor>(outputs.begin(), outputs.end()),
        {},       {}};
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
  return RecomputeInBackward(value, source, nullptr, nullptr);
}

absl::Status GradientTape::RecomputeInBackward(const DTensor& value,
                                               const DTensor& source,
                                               RebuildFn rebuild,
                                               const void* group) {
  DT_RETURN_IF_ERROR(
      CheckRecomputable(value, source, /*same_dtype=*/rebuild == nullptr));
  if (value.id() == source.id()) return absl::OkStatus();
  const DTensor stand_in =
      DTensor::WrapUnchecked(value.runtime(), value.spec_ptr(), Tensor());
  for (GradientTape* tape : ActiveTapes()) {
    tape->recomputed_.insert_or_assign(
        value.id(), Recompute{source, stand_in, rebuild, group});
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
  if (!record.recorded.is_redistribution) return;
  auto found = recomputed_.find(record.input_ids[0]);
  if (found == recomputed_.end()) return;
  DTensor& output = record.outputs[0];
  Recompute derived{
      found->second.source,
      DTensor::WrapUnchecked(output.runtime(), output.spec_ptr(), Tensor()),
      found->second.rebuild, found->second.group};
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

std::vector<GradientTape::HeldTensor> GradientTape::HeldTensors() const {
  std::vector<HeldTensor> held;
  absl::flat_hash_set<uint64_t> seen;
  auto add = [&](absl::Span<const DTensor> tensors,
                 absl::Span<const uint64_t> ids) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i].defined() || !seen.insert(ids[i]).second) continue;
      auto recompute = recomputed_.find(ids[i]);
      held.push_back(
          {tensors[i], recompute != recomputed_.end(),
           recompute != recomputed_.end() ? recompute->second.group : nullptr});
    }
  };
  for (const Record& record : records_) {
    add(record.inputs, record.input_ids);
    add(record.outputs, record.output_ids);
  }
  return held;
}

std::vector<DTensor> GradientTape::OpOutputsWhere(
    const std::function<bool(absl::string_view op)>& wanted) const {
  std::vector<DTensor> outputs;
  for (const Record& record : records_) {
    if (!record.recorded.is_op || !wanted(record.recorded.name)) {
      continue;
    }
    outputs.insert(outputs.end(), record.outputs.begin(), record.outputs.end());
  }
  return outputs;
}

NoGrad::NoGrad() { ++Recording().paused; }

NoGrad::~NoGrad() { --Recording().paused; }

bool IsRecording() {
  const ThreadRecording& recording = Recording();
  return !recording.tapes.empty() && recording.paused == 0;
}

}  // namespace nn
}  // namespace dtensor
