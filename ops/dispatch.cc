#include "dtensor/ops/dispatch.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/dispatch_substitute.h"
#include "dtensor/ops/op_counter.h"
#include "dtensor/ops/op_profile.h"
#include "dtensor/ops/propagation.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/redistribute/executor.h"

namespace dtensor {
namespace {

// Records the call in the active OpCounters.
absl::Status RecordOp(const OpDef& op, const Propagation& propagation,
                      int64_t rank) {
  OpCounter::Event event;
  event.op = op.name;
  event.outputs = propagation.outputs;
  event.cost_us = propagation.cost_us;
  for (const auto& spec : propagation.outputs) {
    DT_ASSIGN_OR_RETURN(int64_t bytes, LocalBytes(*spec, rank));
    event.local_bytes += bytes;
  }
  OpCounter::RecordOnThread(event);
  return absl::OkStatus();
}

thread_local DispatchObserver dispatch_observer = nullptr;
thread_local DispatchSubstitute dispatch_substitute = nullptr;

// Whether the thread's substitute (if any) gave the call's `outputs` (the
// observer then sees the call).
bool Substituted(const OpDef& op, absl::Span<const DTensor* const> inputs,
                 const OpArgs& args, OpOutputs& outputs) {
  if (dispatch_substitute == nullptr || !dispatch_substitute(op, outputs)) {
    return false;
  }
  if (dispatch_observer != nullptr) {
    dispatch_observer(op, inputs, args, outputs);
  }
  return true;
}

}  // namespace

DispatchObserver SetThreadDispatchObserver(DispatchObserver observer) {
  DispatchObserver previous = dispatch_observer;
  dispatch_observer = observer;
  return previous;
}

DispatchSubstitute SetThreadDispatchSubstitute(DispatchSubstitute substitute) {
  return std::exchange(dispatch_substitute, substitute);
}

absl::StatusOr<OpOutputs> Dispatch(const OpDef& op,
                                   absl::Span<const DTensor* const> inputs,
                                   const OpArgs& args) {
  OpOutputs substituted;
  if (Substituted(op, inputs, args, substituted)) return substituted;
  const std::shared_ptr<Runtime>* runtime = nullptr;
  absl::InlinedVector<const DTensorSpec*, 4> specs(inputs.size(), nullptr);
  absl::InlinedVector<const std::shared_ptr<const DTensorSpec>*, 4> owners(
      inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr || !inputs[i]->defined()) continue;
    specs[i] = &inputs[i]->spec();
    owners[i] = &inputs[i]->spec_ptr();
    if (runtime == nullptr) {
      runtime = &inputs[i]->runtime();
    } else if (inputs[i]->runtime() != *runtime) {
      return absl::InvalidArgumentError(
          absl::StrCat(op.name, ": input ", i,
                       " was made with another runtime than the first input"));
    }
  }
  if (runtime == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.name, ": no input given"));
  }
  Runtime& rt = **runtime;
  DT_ASSIGN_OR_RETURN(
      std::shared_ptr<const Propagation> propagation,
      PropagationCache::Shared().Get(op, specs, args, rt, owners));
  const bool metadata = rt.metadata_only();

  absl::InlinedVector<Tensor, 4> locals(propagation->inputs.size());
  for (size_t i = 0; i < propagation->inputs.size(); ++i) {
    const InputRedistribution& in = propagation->inputs[i];
    if (in.from == nullptr) continue;
    if (in.plan == nullptr) {
      if (!metadata) locals[i] = inputs[i]->ToLocal();
    } else if (metadata) {
      RecordRedistribution(*in.plan);
    } else {
      DT_ASSIGN_OR_RETURN(
          locals[i],
          ExecuteRedistribution(*in.plan, inputs[i]->ToLocal(), in.from->mesh(),
                                in.from->shape(), *rt.groups()));
    }
  }

  OpLocals results;
  if (metadata) {
    results.resize(op.num_outputs);
  } else {
    const KernelContext ctx(args, *propagation, rt);
    std::optional<OpProfile> profile;
    if (Profiler::Active()) profile = OpProfile::Start(op.name, locals);
    DT_ASSIGN_OR_RETURN(results, op.kernel(ctx, locals));
    if (profile.has_value()) profile->FinishOp(op, locals, results, args);
    if (results.size() != static_cast<size_t>(op.num_outputs)) {
      return absl::InternalError(absl::StrCat(op.name, "'s kernel returned ",
                                              results.size(), " outputs, not ",
                                              op.num_outputs));
    }
  }
  for (const CommCounter::Event& event : propagation->kernel_events) {
    CommCounter::RecordOnThread(event);
  }
  if (OpCounter::AnyActive()) {
    DT_RETURN_IF_ERROR(RecordOp(op, *propagation, rt.rank()));
  }

  OpOutputs outputs;
  for (size_t j = 0; j < results.size(); ++j) {
    outputs.push_back(DTensor::WrapUnchecked(*runtime, propagation->outputs[j],
                                             std::move(results[j])));
  }
  if (dispatch_observer != nullptr) {
    dispatch_observer(op, inputs, args, outputs);
  }
  return outputs;
}

absl::StatusOr<DTensor> DispatchOne(const OpDef& op,
                                    absl::Span<const DTensor* const> inputs,
                                    const OpArgs& args) {
  if (op.num_outputs != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op.name, " has ", op.num_outputs, " outputs; DispatchOne needs one"));
  }
  DT_ASSIGN_OR_RETURN(OpOutputs outputs, Dispatch(op, inputs, args));
  return std::move(outputs[0]);
}

}  // namespace dtensor
