#include "dtensor/ops/elementwise_op.h"

#include <numeric>
#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace ops {
namespace {

std::vector<EinsumSpec::PartialRule> RulesOf(Linearity linearity) {
  const std::vector<ReduceOp> linear = {ReduceOp::kSum, ReduceOp::kAvg};
  switch (linearity) {
    case Linearity::kNone:
      return {};
    case Linearity::kSumJoint:
      return {{{0, 1}, linear}};
    case Linearity::kSumEach:
      return {{{0}, linear}, {{1}, linear}};
    case Linearity::kSumFirst:
      return {{{0}, linear}};
    case Linearity::kSumSecond:
      return {{{1}, linear}};
    case Linearity::kAffineFirst:
      return {{{0}, {ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}}};
    case Linearity::kMonotoneFirst:
      return {{{0}, {ReduceOp::kMax, ReduceOp::kMin}}};
    case Linearity::kMaxJoint:
      return {{{0, 1}, {ReduceOp::kMax}}};
    case Linearity::kMinJoint:
      return {{{0, 1}, {ReduceOp::kMin}}};
    case Linearity::kSelect:
      return {
          {{1, 2},
           {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}}};
  }
  return {};
}

// The broadcast shape of the inputs; an error names the op and the shapes.
absl::StatusOr<Shape> BroadcastAll(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs) {
  Shape shape = inputs[0]->shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    absl::StatusOr<Shape> next = BroadcastShapes(shape, inputs[i]->shape());
    if (!next.ok()) return WithOpName(op, next.status());
    shape = *std::move(next);
  }
  return shape;
}

// The strategies of an elementwise op: inputs iterating an output dim alike
// are sharded on it (every output alike), Partial inputs pass through as
// `linearity` says.
StrategyFn ElementwiseStrategies(Linearity linearity) {
  return [rules = RulesOf(linearity)](const StrategyContext& ctx) {
    const Shape& out = ctx.outputs[0].shape;
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(out.size());
    for (const DTensorSpec* in : ctx.inputs) {
      spec.loops.inputs.push_back(BroadcastLoops(in->shape(), out));
    }
    std::vector<int> out_loops(out.size());
    std::iota(out_loops.begin(), out_loops.end(), 0);
    spec.loops.outputs.assign(ctx.outputs.size(), out_loops);
    spec.partial_rules = rules;
    return EinsumStrategies(ctx, spec);
  };
}

}  // namespace

OpDef ElementwiseOp(absl::string_view name, absl::string_view summary,
                    int arity, absl::Span<const ArgSpec> args, LocalFn fn,
                    Linearity linearity, BackwardFn backward) {
  OpDef def = NamedOpDef(name, summary, args);
  def.num_inputs = arity;
  def.infer =
      [name, fn](
          absl::Span<const DTensorSpec* const> inputs,
          const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(Shape shape, BroadcastAll(name, inputs));
    DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(name, fn, inputs, args));
    return std::vector<TensorMeta>{{std::move(shape), dtype}};
  };
  def.strategies = ElementwiseStrategies(linearity);
  def.kernel = LocalKernel(std::move(fn));
  def.backward = std::move(backward);
  return def;
}

OpDef ElementwiseMultiOutputOp(absl::string_view name,
                               absl::string_view summary, int arity,
                               int num_outputs, MultiLocalFn fn,
                               Linearity linearity, BackwardFn backward) {
  const LocalFn first = [fn](absl::Span<const Tensor> in,
                             const OpArgs& args) -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(OpLocals out, fn(in, args));
    return std::move(out[0]);
  };
  OpDef def = ElementwiseOp(name, summary, arity, {}, first, linearity,
                            std::move(backward));
  def.num_outputs = num_outputs;
  def.infer =
      [infer = std::move(def.infer), num_outputs](
          absl::Span<const DTensorSpec* const> inputs,
          const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(std::vector<TensorMeta> metas, infer(inputs, args));
    metas.resize(num_outputs, metas[0]);
    return metas;
  };
  def.kernel = [fn = std::move(fn)](const KernelContext& ctx,
                                    absl::Span<const Tensor> inputs) {
    return fn(inputs, ctx.args());
  };
  return def;
}

BackwardFn UnaryBackward(UnaryGrad grad) {
  return [grad](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    DT_ASSIGN_OR_RETURN(DTensor da, grad(call.inputs[0], call.outputs[0],
                                         call.grad_outputs[0], call.args));
    return InputGrads{std::move(da)};
  };
}

absl::StatusOr<DTensor> MaskAs(const DTensor& cond, const DTensor& like) {
  return To(cond, like.dtype());
}

absl::StatusOr<DTensor> OneMinus(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(DTensor negated, Neg(x));
  return Add(negated, 1.0);
}

absl::StatusOr<DTensor> SiluSecondDerivative(const DTensor& a) {
  DT_ASSIGN_OR_RETURN(DTensor s, Sigmoid(a));
  DT_ASSIGN_OR_RETURN(DTensor slope, OneMinus(s));
  DT_ASSIGN_OR_RETURN(slope, Mul(slope, s));
  DT_ASSIGN_OR_RETURN(DTensor inner, Mul(s, -2.0));
  DT_ASSIGN_OR_RETURN(inner, Add(inner, 1.0));
  DT_ASSIGN_OR_RETURN(inner, Mul(inner, a));
  DT_ASSIGN_OR_RETURN(inner, Add(inner, 2.0));
  return Mul(slope, inner);
}

absl::StatusOr<DTensor> CallElementwise(
    const OpDef& def, std::initializer_list<const DTensor*> in,
    const OpArgs& args) {
  return DispatchOne(def, absl::MakeConstSpan(in.begin(), in.size()), args);
}

}  // namespace ops
}  // namespace dtensor
