#include "nn/autograd.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ops/backward_helpers.h"
#include "ops/dispatch.h"
#include "ops/elementwise_ops.h"
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

// Adds `grad` to the gradient accumulated for `id`.
absl::Status Accumulate(absl::flat_hash_map<uint64_t, DTensor>& grads,
                        uint64_t id, DTensor grad) {
  auto [it, inserted] = grads.try_emplace(id, grad);
  if (!inserted) {
    DT_ASSIGN_OR_RETURN(it->second, ops::Add(it->second, grad));
  }
  return absl::OkStatus();
}

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

void GradientTape::RecordOnThread(const OpDef& op,
                                  absl::Span<const DTensor* const> inputs,
                                  const OpArgs& args,
                                  absl::Span<const DTensor> outputs) {
  ThreadRecording& recording = Recording();
  if (recording.paused > 0) return;
  for (auto it = recording.tapes.begin(); it != recording.tapes.end(); ++it) {
    // A tape with several active scopes records once.
    if (std::find(recording.tapes.begin(), it, *it) != it) continue;
    Record record{&op, std::vector<DTensor>(op.num_inputs), args,
                  std::vector<DTensor>(outputs.begin(), outputs.end())};
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] != nullptr) record.inputs[i] = *inputs[i];
    }
    (*it)->records_.push_back(std::move(record));
  }
}

absl::StatusOr<std::vector<DTensor>> GradientTape::Gradient(
    const DTensor& target, absl::Span<const DTensor> sources,
    const GradientOptions& options) const {
  NoGrad not_recorded;
  DT_ASSIGN_OR_RETURN(DTensor seed, SeedGradient(target, options));
  DT_RETURN_IF_ERROR(CheckSources(sources));

  // The recorded tensors that depend on a source: only their gradients are
  // computed.
  absl::flat_hash_set<uint64_t> source_ids;
  for (const DTensor& s : sources) source_ids.insert(s.id());
  absl::flat_hash_set<uint64_t> depends = source_ids;
  for (const Record& record : records_) {
    const bool reached = std::any_of(
        record.inputs.begin(), record.inputs.end(), [&](const DTensor& in) {
          return in.defined() && depends.contains(in.id());
        });
    if (!reached) continue;
    for (const DTensor& out : record.outputs) {
      if (IsDifferentiable(out)) depends.insert(out.id());
    }
  }

  // Backward, the gradient of each tensor complete once every later call
  // that used it has been run; a tensor's gradient is dropped once used,
  // unless it is a source.
  absl::flat_hash_map<uint64_t, DTensor> grads;
  if (depends.contains(target.id())) grads.emplace(target.id(), seed);
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    const Record& record = *it;
    std::vector<DTensor> grad_outputs(record.outputs.size());
    bool any = false;
    for (size_t j = 0; j < record.outputs.size(); ++j) {
      auto found = grads.find(record.outputs[j].id());
      if (found == grads.end()) continue;
      any = true;
      grad_outputs[j] = found->second;
      if (!source_ids.contains(found->first)) grads.erase(found);
    }
    if (!any) continue;
    const OpDef& op = *record.op;
    if (!op.backward) {
      return absl::UnimplementedError(absl::StrCat(
          "Gradient: op ", op.name,
          " is on the path from a source to the target but has no backward "
          "definition"));
    }
    const BackwardCall call{record.inputs, record.args, record.outputs,
                            grad_outputs};
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
      if (!grad.defined() || !IsDifferentiable(input) ||
          !depends.contains(input.id())) {
        continue;
      }
      DT_RETURN_IF_ERROR(CheckInputGradient(op, i, input, grad));
      DT_RETURN_IF_ERROR(Accumulate(grads, input.id(), std::move(grad)));
    }
  }

  std::vector<DTensor> result;
  result.reserve(sources.size());
  for (const DTensor& source : sources) {
    auto found = grads.find(source.id());
    DTensor grad;
    if (found != grads.end() && IsDifferentiable(source)) {
      grad = found->second;
    } else {
      DT_ASSIGN_OR_RETURN(grad, ops::FullLike(source, 0));
    }
    const Sharding layout = ops::WithoutPartials(source.sharding());
    if (!options.keep_propagated_layouts && grad.sharding() != layout) {
      DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(layout));
    }
    result.push_back(std::move(grad));
  }
  return result;
}

NoGrad::NoGrad() { ++Recording().paused; }

NoGrad::~NoGrad() { --Recording().paused; }

bool IsRecording() {
  const ThreadRecording& recording = Recording();
  return !recording.tapes.empty() && recording.paused == 0;
}

}  // namespace nn
}  // namespace dtensor
