#include "dtensor/ops/join_ops.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/slice_ops.h"
#include "dtensor/ops/view_ops.h"

namespace dtensor {
namespace ops {
namespace {

// cat and stack.
constexpr ArgSpec kJoinArgs[] = {{"dim", ArgKind::kInt}};
constexpr auto kDim = KeyOf<ArgKind::kInt>(kJoinArgs, "dim");

// The dim of a cat (or the new dim of a stack) of tensors of `rank`,
// normalised; an error names the op and the dim.
absl::StatusOr<int64_t> JoinDim(absl::string_view op, bool stack, int64_t rank,
                                int64_t dim) {
  absl::StatusOr<int64_t> d = NormalizeDim(dim, stack ? rank + 1 : rank);
  if (!d.ok()) return WithOpName(op, d.status());
  return *d;
}

// The output of joining the given inputs (absent ones skipped), with the
// tensor layer's checks.
absl::StatusOr<std::vector<TensorMeta>> JoinInfer(
    absl::string_view op, bool stack,
    absl::Span<const DTensorSpec* const> inputs, const OpArgs& args) {
  const DTensorSpec& first = *inputs[0];
  DT_ASSIGN_OR_RETURN(const int64_t d,
                      JoinDim(op, stack, first.ndim(), args.Get(kDim)));
  Shape out = first.shape();
  if (stack) {
    out.insert(out.begin() + d, 0);
  } else {
    out[d] = 0;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    const DTensorSpec& in = *inputs[i];
    if (in.dtype() != first.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": tensor ", i, " is ", std::string(DTypeName(in.dtype())),
          ", tensor 0 is ", std::string(DTypeName(first.dtype()))));
    }
    bool matches = in.ndim() == first.ndim();
    for (int64_t j = 0; matches && j < first.ndim(); ++j) {
      matches = (!stack && j == d) || in.shape()[j] == first.shape()[j];
    }
    if (!matches) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": tensor ", i, " has shape ", ShapeToString(in.shape()),
          ", tensor 0 has ", ShapeToString(first.shape()),
          stack ? "" : absl::StrCat(": they may differ in dim ", d, " only")));
    }
    out[d] += stack ? 1 : in.shape()[d];
  }
  return std::vector<TensorMeta>{{std::move(out), first.dtype()}};
}

absl::StatusOr<std::vector<OpStrategy>> JoinStrategies(
    bool stack, const StrategyContext& ctx) {
  const int64_t rank = ctx.inputs[0]->ndim();
  // Checked by infer.
  const int64_t d = *NormalizeDim(ctx.args.Get(kDim), stack ? rank + 1 : rank);
  const std::vector<int> in_loops =
      stack ? IdentityLoops(rank) : IdentityLoops(rank, {d});
  std::vector<int> out_loops = in_loops;
  if (stack) out_loops.insert(out_loops.begin() + d, kNoLoop);
  EinsumSpec spec;
  spec.num_loops = static_cast<int>(rank);
  EinsumSpec::PartialRule all_inputs{{}, AnyReduceOps()};
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    spec.loops.inputs.push_back(ctx.inputs[i] == nullptr ? std::vector<int>{}
                                                         : in_loops);
    all_inputs.inputs.push_back(static_cast<int>(i));
  }
  spec.loops.outputs = {std::move(out_loops)};
  spec.partial_rules = {std::move(all_inputs)};
  return EinsumStrategies(ctx, spec);
}

// Each given input's part of the output's gradient: its range of the cat dim
// (the new dim of a stack, removed). Split lays the gradient out once for
// all parts.
absl::StatusOr<InputGrads> JoinBackward(bool stack, const BackwardCall& call) {
  const DTensor& g = call.grad_outputs[0];
  const int64_t d = *NormalizeDim(call.args.Get(kDim), g.spec().ndim());
  std::vector<int64_t> sizes;
  for (const DTensor& in : call.inputs) {
    if (in.defined()) sizes.push_back(stack ? 1 : in.shape()[d]);
  }
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> parts, Split(g, sizes, d));
  InputGrads grads(call.inputs.size());
  size_t next = 0;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (!call.inputs[i].defined()) continue;
    grads[i] = std::move(parts[next++]);
    if (stack) {
      DT_ASSIGN_OR_RETURN(grads[i], Reshape(grads[i], call.inputs[i].shape()));
    }
  }
  return grads;
}

// cat, or with `stack` stack.
OpDef MakeJoin(bool stack) {
  const absl::string_view name = stack ? "stack" : "cat";
  OpDef def = NamedOpDef(
      name, stack ? "stack along a new dim" : "concatenate along dim",
      kJoinArgs);
  def.num_inputs = kMaxJoinInputs;
  def.num_optional_inputs = kMaxJoinInputs - 1;
  def.infer = [name, stack](absl::Span<const DTensorSpec* const> inputs,
                            const OpArgs& args) {
    return JoinInfer(name, stack, inputs, args);
  };
  def.strategies = [stack](const StrategyContext& ctx) {
    return JoinStrategies(stack, ctx);
  };
  def.kernel =
      LocalKernel([stack](absl::Span<const Tensor> in, const OpArgs& args) {
        std::vector<Tensor> given;
        for (const Tensor& t : in) {
          if (t.defined()) given.push_back(t);
        }
        return stack ? dtensor::Stack(given, args.Get(kDim))
                     : dtensor::Cat(given, args.Get(kDim));
      });
  def.backward = [stack](const BackwardCall& call) {
    return JoinBackward(stack, call);
  };
  return def;
}

const OpDef& CatDef() { return StaticOpDef<MakeJoin, /*stack=*/false>(); }
const OpDef& StackDef() { return StaticOpDef<MakeJoin, /*stack=*/true>(); }

// One call of `op` on up to kMaxJoinInputs tensors.
absl::StatusOr<DTensor> JoinOnce(const OpDef& op,
                                 absl::Span<const DTensor* const> tensors,
                                 int64_t dim) {
  OpArgs args;
  args.AddInt(dim);
  return DispatchOne(op, tensors, args);
}

}  // namespace

absl::StatusOr<DTensor> Cat(absl::Span<const DTensor> tensors, int64_t dim) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("cat: no tensors to concatenate");
  }
  // Joined kMaxJoinInputs at a time, each call taking the previous result
  // first.
  std::vector<const DTensor*> batch;
  DTensor joined;
  size_t next = 0;
  while (next < tensors.size()) {
    batch.clear();
    if (joined.defined()) batch.push_back(&joined);
    while (next < tensors.size() &&
           batch.size() < static_cast<size_t>(kMaxJoinInputs)) {
      batch.push_back(&tensors[next++]);
    }
    DT_ASSIGN_OR_RETURN(DTensor result, JoinOnce(CatDef(), batch, dim));
    joined = std::move(result);
  }
  return joined;
}

absl::StatusOr<DTensor> Stack(absl::Span<const DTensor> tensors, int64_t dim) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("stack: no tensors to stack");
  }
  if (tensors.size() <= static_cast<size_t>(kMaxJoinInputs)) {
    std::vector<const DTensor*> all;
    for (const DTensor& t : tensors) all.push_back(&t);
    return JoinOnce(StackDef(), all, dim);
  }
  // A stack is a cat of the tensors with the new dim inserted.
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].defined() && tensors[0].defined() &&
        tensors[i].shape() != tensors[0].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stack: tensor ", i, " has shape ", ShapeToString(tensors[i].shape()),
          ", tensor 0 has ", ShapeToString(tensors[0].shape())));
    }
  }
  std::vector<DTensor> unsqueezed;
  for (const DTensor& t : tensors) {
    DT_ASSIGN_OR_RETURN(DTensor piece, Unsqueeze(t, dim));
    unsqueezed.push_back(std::move(piece));
  }
  return Cat(unsqueezed, dim);
}

std::vector<const OpDef*> JoinOps() { return {&CatDef(), &StackDef()}; }

}  // namespace ops
}  // namespace dtensor
